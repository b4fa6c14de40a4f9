//! A `git-lfs-transfer` session on an SSH channel: the repository checked,
//! then [`super::Session`] on a blocking thread, fed from the channel at
//! the pace input must keep, its answers sent as they are written.

use std::sync::Arc;

use gitstow_service::mirrors::{LfsAccess, LfsRefusal};
use gitstow_service::Host;

use crate::git;
use crate::listener::{say, NOT_FOUND};

/// Whether LFS objects of `repo` may move ([`Host::lfs_repository`]).
/// `Err` is the line to say on stderr.
pub(crate) async fn repository(host: &Host, repo: &str, upload: bool) -> Result<(), String> {
    let access = if upload {
        LfsAccess::Upload
    } else {
        LfsAccess::Download
    };
    match host.lfs_repository(repo, access).await {
        Ok(()) => Ok(()),
        Err(LfsRefusal::NotFound) => Err(NOT_FOUND.to_owned()),
        Err(refusal) => Err(format!("ERROR: {refusal}")),
    }
}

/// One `git-lfs-transfer` session on a blocking thread; the exit status
/// (0 after the client's `quit` or EOF, 128 when it broke the protocol or
/// the channel failed, said on stderr).
pub(crate) async fn run(
    host: &Arc<Host>,
    input: &mut (impl tokio::io::AsyncRead + Unpin + Send),
    out: &git::Output,
    repo: &str,
    upload: bool,
    admin: bool,
    owner: String,
) -> u32 {
    let config = host.config();
    let limits = config.limits;
    let pace = gitstow_service::output::Pace {
        stall: limits.pace.idle,
        min_rate: limits.pace.min_rate,
    };
    let (mut reader, tx) = crate::io::BlockingReader::new(Box::new(std::io::empty()), pace);
    let (mut writer, source) = host.response();
    let store = host.store().clone();
    let staging = config.receive.staging_dir.clone();
    let repo_name = repo.to_owned();
    let max_size = limits.max_push_bytes;
    let task = tokio::task::spawn_blocking(move || {
        let session = super::Session {
            store: store.as_ref(),
            repo: &repo_name,
            upload,
            admin,
            owner,
            max_size,
            staging_dir: staging.as_deref(),
            now: || {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs())
            },
        };
        let r = session.serve(&mut reader, &mut writer);
        drop(writer);
        r
    });
    let send = gitstow_service::output::forward(source, host.response_pace(), |chunk| async move {
        out.send_chunk(chunk).await
    });
    let both = async {
        let (result, _) = tokio::join!(task, send);
        result
    };
    tokio::pin!(both);
    let fed = crate::io::pump(input, tx, limits.pace.idle);
    tokio::pin!(fed);
    let result = tokio::select! {
        r = &mut both => r,
        () = &mut fed => both.await,
    };
    match result {
        Ok(Ok(())) => 0,
        Ok(Err(super::Ended::Protocol(why))) => {
            tracing::info!(repo, error = %why, "ssh: git-lfs-transfer: protocol error");
            say(out.half(), &format!("fatal: {why}")).await;
            128
        }
        Ok(Err(super::Ended::Io(e))) => {
            tracing::info!(repo, error = %e, "ssh: git-lfs-transfer ended");
            128
        }
        Err(_) => 128,
    }
}

//! git's commands over an SSH channel: the framing around the service
//! layer ([`gitstow_service::Host`]). Over SSH a command is one stream in
//! each direction (gitprotocol-pack(5)): the advertisement first, then the
//! client's requests; the answers are the same bytes as smart HTTP's
//! without its `# service=` header.
//!
//! - upload-pack in protocol v2 (`GIT_PROTOCOL=version=2`, what git sends
//!   by default since 2.26): the capabilities, then one command request
//!   (up to its flush-pkt) after another, each answered by the service as
//!   one HTTP POST would be, until the client's lone flush-pkt or EOF.
//! - upload-pack in v0/v1 (older clients, libgit2, `protocol.version=0`):
//!   the advertisement, then one stateful negotiation answered round by
//!   round (`gitstow_upload::serve_v0_session`) and the pack.
//! - receive-pack (v0 in every git): the advertisement, then the commands
//!   (and push options) up to their flush-pkts and the pack up to the
//!   client's EOF, spooled to a temp file as HTTP's body is, then run.

use std::sync::Arc;

use bytes::Bytes;
use gitstow_protocol::{ProtocolVersion, Service};
use gitstow_service::output;
use gitstow_service::{Fault, Host, Principal, Refusal};
use russh::server::Msg;
use russh::ChannelWriteHalf;
use tokio::io::AsyncRead;

use crate::io::{pump, BlockingReader};
use crate::request::{read_request, spool_error, spool_push};

/// The channel a command writes to, counting what it sends.
#[derive(Debug)]
pub struct Output {
    half: ChannelWriteHalf<Msg>,
    sent: std::sync::atomic::AtomicU64,
}

impl Output {
    /// Writes to `half`.
    pub fn new(half: ChannelWriteHalf<Msg>) -> Self {
        Output {
            half,
            sent: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The channel.
    pub fn half(&self) -> &ChannelWriteHalf<Msg> {
        &self.half
    }

    /// Bytes of data sent (stdout).
    pub fn sent(&self) -> u64 {
        self.sent.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sends `chunk` as channel data; false when the channel failed.
    pub async fn send_chunk(&self, chunk: Bytes) -> bool {
        send(self, chunk).await
    }
}

/// Sends `chunk` as channel data; false when the channel failed.
async fn send(out: &Output, chunk: Bytes) -> bool {
    let n = chunk.len() as u64;
    let ok = out.half.data_bytes(chunk).await.is_ok();
    if ok {
        out.sent.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }
    ok
}

/// What bounds one command's input: the service's limits (the one value
/// both transports read by, `--max-pack-size`, `--idle-timeout`,
/// `--min-body-rate`) and where requests spool.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// Sizes and pace.
    pub(crate) input: gitstow_service::input::Limits,
    /// Where pushes and large fetch requests are spooled (`None`: the
    /// system's temp directory).
    pub(crate) staging_dir: Option<std::path::PathBuf>,
}

impl Limits {
    /// The limits `host` runs with.
    fn of(host: &Host) -> Limits {
        let config = host.config();
        Limits {
            input: config.limits,
            staging_dir: config.receive.staging_dir.clone(),
        }
    }
}

/// Why a command ended early; each is said on the client's stderr.
#[derive(Debug)]
pub enum Failure {
    /// Refused before any of git's protocol (`ERROR: …`, exit 128).
    Refused(Refusal),
    /// The request broke the protocol or a limit (`fatal: …`, exit 128).
    Protocol(String),
    /// The command failed ([`Fault`]: the client's, or the server's said
    /// in its one text; `fatal: …`, exit 128).
    Fault(Fault),
    /// The client went away, or the channel failed: nothing to say.
    Gone,
}

impl From<Refusal> for Failure {
    fn from(r: Refusal) -> Self {
        Failure::Refused(r)
    }
}

/// One git command to run.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The services.
    pub host: &'a Arc<Host>,
    /// Who asks (authorized for the repository already).
    pub principal: &'a Principal,
    /// The repository name.
    pub name: &'a str,
    /// upload-pack or receive-pack.
    pub service: Service,
    /// The protocol version the client asked for (`GIT_PROTOCOL`).
    pub version: ProtocolVersion,
}

/// Runs `request`, reading the client's stdin from `input` and writing to
/// `out`.
///
/// # Errors
/// [`Failure`], for the caller to report and set the exit status.
pub async fn run(
    request: Request<'_>,
    input: &mut (impl AsyncRead + Unpin + Send),
    out: &Output,
) -> Result<(), Failure> {
    let Request {
        host,
        principal,
        name,
        service,
        version,
    } = request;
    let limits = &Limits::of(host);
    match service {
        Service::UploadPack if version == ProtocolVersion::V2 => {
            upload_pack_v2(host, principal, name, limits, input, out).await
        }
        Service::UploadPack => {
            upload_pack_v0(host, principal, name, version, limits, input, out).await
        }
        Service::ReceivePack => {
            receive_pack(host, principal, name, version, limits, input, out).await
        }
    }
}

async fn upload_pack_v2(
    host: &Arc<Host>,
    principal: &Principal,
    name: &str,
    limits: &Limits,
    input: &mut (impl AsyncRead + Unpin + Send),
    out: &Output,
) -> Result<(), Failure> {
    advertise(
        host,
        principal,
        name,
        Service::UploadPack,
        ProtocolVersion::V2,
        out,
    )
    .await?;
    loop {
        // The client ends the session with a lone flush-pkt or EOF.
        let Some(mut request) = read_request(input, limits, "the request").await? else {
            return Ok(());
        };
        let ls_refs = gitstow_service::fetch::is_ls_refs(&mut request);
        let mut fetch = host.fetch(name, principal, true, ls_refs).await?;
        let served = blocking(host, out, move |w| {
            w.release_before_waiting(fetch.take_listing_permit());
            use std::io::Seek;
            request
                .rewind()
                .map_err(|e| Fault::server("rewinding the fetch request", &e))?;
            fetch.run(&mut request, w)
        })
        .await?;
        if let Err(fault) = served {
            return Err(Failure::Fault(fault));
        }
    }
}

/// v0/v1: the advertisement, then one stateful negotiation (the want list,
/// rounds of haves answered as they end, `done`) and the pack, in one
/// fetch slot.
async fn upload_pack_v0(
    host: &Arc<Host>,
    principal: &Principal,
    name: &str,
    version: ProtocolVersion,
    limits: &Limits,
    input: &mut (impl AsyncRead + Unpin + Send),
    out: &Output,
) -> Result<(), Failure> {
    advertise(host, principal, name, Service::UploadPack, version, out).await?;
    // The want list (and any shallow and deepen lines) is read up to its
    // flush-pkt before the request queues for a fetch slot, in memory up
    // to 64 KiB and in a file beyond: a client that trickles it holds no
    // slot. A client that wants nothing (`git ls-remote`) sends a lone
    // flush-pkt and hangs up: it takes no slot at all.
    let Some(wants) = read_request(input, limits, "the want list").await? else {
        return Ok(());
    };
    let fetch = host.fetch(name, principal, false, false).await?;
    // Then the rounds of haves, read as the negotiation asks for them:
    // each wait for the client spends a credit its bytes earn back.
    let pace = output::Pace {
        stall: limits.input.pace.idle,
        min_rate: limits.input.pace.min_rate,
    };
    let (mut reader, tx) = BlockingReader::new(Box::new(wants), pace);
    let (mut writer, source) = host.response();
    let task = tokio::task::spawn_blocking(move || {
        let r = fetch.run_session(&mut reader, &mut writer);
        drop(writer);
        r
    });
    let send = output::forward(source, host.response_pace(), |chunk: Bytes| async move {
        send(out, chunk).await
    });
    let both = async {
        let (result, _) = tokio::join!(task, send);
        result
    };
    tokio::pin!(both);
    let fed = pump(input, tx, limits.input.pace.idle);
    tokio::pin!(fed);
    let result = tokio::select! {
        r = &mut both => r,
        () = &mut fed => both.await,
    };
    match result {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(fault)) => Err(Failure::Fault(fault)),
        Err(_) => Err(Failure::Gone),
    }
}

async fn receive_pack(
    host: &Arc<Host>,
    principal: &Principal,
    name: &str,
    version: ProtocolVersion,
    limits: &Limits,
    input: &mut (impl AsyncRead + Unpin + Send),
    out: &Output,
) -> Result<(), Failure> {
    host.push_target(name).await?;
    advertise(host, principal, name, Service::ReceivePack, version, out).await?;
    let file = match &limits.staging_dir {
        Some(dir) => tempfile::tempfile_in(dir),
        None => tempfile::tempfile(),
    }
    .map_err(spool_error)?;
    let spooled = spool_push(input, &file, limits).await?;
    {
        // The spool shares the file's offset: read it from its start.
        use std::io::Seek;
        (&file).rewind().map_err(spool_error)?;
    }
    let push = host.push(name, principal, spooled.bytes).await?;
    let truncated = spooled.truncated;
    let ran = blocking(host, out, move |w| push.run(&file, truncated, w)).await?;
    ran.map(|_| ()).map_err(Failure::Fault)
}

/// Sends the advertisement of `service` in `version` (no HTTP header).
async fn advertise(
    host: &Arc<Host>,
    principal: &Principal,
    name: &str,
    service: Service,
    version: ProtocolVersion,
    out: &Output,
) -> Result<(), Failure> {
    let mut advertisement = host
        .advertisement(name, principal, service, version)
        .await?;
    blocking(host, out, move |w| {
        w.release_before_waiting(advertisement.take_listing_permit());
        advertisement.write(w, false)
    })
    .await?
    .map_err(Failure::Fault)
}

/// Runs `job` on a blocking thread, its output sent to the channel as it
/// is written, at the pace `host` asks of clients
/// ([`gitstow_service::output`]); `Err(Gone)` when the thread panicked.
async fn blocking<T: Send + 'static>(
    host: &Host,
    out: &Output,
    job: impl FnOnce(&mut output::Writer) -> T + Send + 'static,
) -> Result<T, Failure> {
    let (mut writer, source) = host.response();
    let task = tokio::task::spawn_blocking(move || {
        let r = job(&mut writer);
        drop(writer);
        r
    });
    let send = output::forward(source, host.response_pace(), |chunk: Bytes| async move {
        send(out, chunk).await
    });
    let (result, _) = tokio::join!(task, send);
    result.map_err(|_| Failure::Gone)
}

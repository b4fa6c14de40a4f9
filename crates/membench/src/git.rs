//! The real `git` client: the one local copy of the source repository, the
//! pushes into the daemon, and the size of what is pushed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// Size of the repository that each push sends: objects from
/// `git count-objects -v` of the local copy (git-count-objects(1)), bytes
/// from its `.pack` files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackStats {
    /// Objects: `in-pack` plus loose `count`.
    pub objects: u64,
    /// Bytes: the sizes of `objects/pack/*.pack` plus the loose objects'
    /// `size` (KiB in git's output) × 1024.
    pub pack_bytes: u64,
}

/// A `git` command with prompts off and no repository from the environment.
pub fn git_cmd() -> Command {
    let mut cmd = Command::new("git");
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_OBJECT_DIRECTORY")
        .stdin(Stdio::null());
    cmd
}

fn run(mut cmd: Command, what: &str) -> Result<Output> {
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out)
}

/// `git --version`, trimmed.
pub fn version() -> Result<String> {
    let mut cmd = git_cmd();
    cmd.arg("--version");
    let out = run(cmd, "git --version")?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The local ref names a push refspec reads (`+refs/heads/*:refs/x/*` reads
/// `refs/heads/*`), or `None` when one does not name refs (a bare object id,
/// `HEAD`, a deletion `:dst`).
fn refspec_sources(refspecs: &[String]) -> Option<Vec<String>> {
    refspecs
        .iter()
        .map(|spec| {
            let spec = spec.strip_prefix('+').unwrap_or(spec);
            let src = spec.split(':').next().unwrap_or(spec);
            src.starts_with("refs/").then(|| src.to_owned())
        })
        .collect()
}

/// Makes the local copy `dest` of `source` (a path or URL) that every push
/// sends from. With no refspecs: `git clone --mirror --no-local` (a fresh
/// pack of everything reachable from every ref). With refspecs that name
/// refs: a bare repository that fetches exactly the refs the pushes read
/// (`+SRC:SRC`), so the pack figures count what is pushed and nothing more.
pub fn make_mirror(source: &str, dest: &Path, refspecs: &[String]) -> Result<()> {
    let sources = refspec_sources(refspecs).filter(|s| !s.is_empty());
    let Some(sources) = sources else {
        let mut cmd = git_cmd();
        cmd.args(["clone", "--quiet", "--mirror", "--no-local", source])
            .arg(dest);
        run(cmd, &format!("git clone --mirror {source}"))?;
        return Ok(());
    };
    let mut cmd = git_cmd();
    cmd.args(["init", "--quiet", "--bare"]).arg(dest);
    run(cmd, "git init --bare")?;
    let mut cmd = git_cmd();
    cmd.arg("-C")
        .arg(dest)
        .args([
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            source,
        ])
        .args(sources.iter().map(|s| format!("+{s}:{s}")));
    run(cmd, &format!("git fetch {source} {}", sources.join(" ")))?;
    Ok(())
}

/// The branch a small repository of [`make_small`] is pushed as.
pub const SMALL_REFSPEC: &str = "HEAD:refs/heads/main";

/// Makes `dest`, a repository of one commit of one small file (three
/// objects), whose push measures the fixed cost of a push; returns its
/// size as [`pack_stats`] gives it.
pub fn make_small(dest: &Path) -> Result<PackStats> {
    let mut cmd = git_cmd();
    cmd.args(["init", "--quiet"]).arg(dest);
    run(cmd, "git init")?;
    std::fs::write(dest.join("README"), "one small commit\n")
        .with_context(|| format!("writing into {}", dest.display()))?;
    let mut cmd = git_cmd();
    cmd.arg("-C").arg(dest).args(["add", "README"]);
    run(cmd, "git add")?;
    let mut cmd = git_cmd();
    cmd.arg("-C")
        .arg(dest)
        .args([
            "-c",
            "user.name=membench",
            "-c",
            "user.email=membench@localhost",
        ])
        .args(["commit", "--quiet", "-m", "one small commit"]);
    run(cmd, "git commit")?;
    pack_stats(&dest.join(".git"))
}

/// Parses `git count-objects -v` output, given the bytes of the `.pack`
/// files (git's `size-pack` counts the `.idx` files too, and is rounded).
pub fn parse_count_objects(text: &str, pack_file_bytes: u64) -> PackStats {
    let field = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(name)?
                    .strip_prefix(": ")?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or(0)
    };
    PackStats {
        objects: field("in-pack") + field("count"),
        pack_bytes: pack_file_bytes + field("size") * 1024,
    }
}

/// [`PackStats`] of the local copy (a bare repository).
pub fn pack_stats(repo: &Path) -> Result<PackStats> {
    let dir = repo.join("objects").join("pack");
    let mut pack_file_bytes = 0;
    for entry in std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        if entry.path().extension().is_some_and(|e| e == "pack") {
            pack_file_bytes += entry.metadata()?.len();
        }
    }
    let mut cmd = git_cmd();
    cmd.arg("-C").arg(repo).args(["count-objects", "-v"]);
    let out = run(cmd, "git count-objects -v")?;
    let stats = parse_count_objects(&String::from_utf8_lossy(&out.stdout), pack_file_bytes);
    if stats.objects == 0 {
        bail!("the repository to push ({}) has no objects", repo.display());
    }
    Ok(stats)
}

/// What one `git push` did.
#[derive(Debug, Clone)]
pub struct PushOutcome {
    /// Wall time of the `git push` process, in seconds.
    pub wall_s: f64,
    /// `None` on success, else git's exit status and stderr.
    pub error: Option<String>,
}

/// Pushes `mirror` to `url` with the real client: `git push --mirror URL`,
/// or `git push URL REFSPEC…` when refspecs are given. Never fails itself:
/// a failed push is an outcome.
pub fn push(mirror: &Path, url: &str, refspecs: &[String]) -> PushOutcome {
    let mut cmd = git_cmd();
    cmd.arg("-C").arg(mirror).arg("push");
    if refspecs.is_empty() {
        cmd.arg("--mirror").arg(url);
    } else {
        cmd.arg(url).args(refspecs);
    }
    let started = Instant::now();
    let result = cmd.output();
    let wall_s = started.elapsed().as_secs_f64();
    let error = match result {
        Err(e) => Some(format!("cannot run git push: {e}")),
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "git push {url} exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    };
    PushOutcome { wall_s, error }
}

/// The refs a repository at `url` advertises (`git ls-remote URL`), as
/// `(oid, refname)` pairs.
pub fn ls_remote(url: &str) -> Result<Vec<(String, String)>> {
    let mut cmd = git_cmd();
    cmd.args(["ls-remote", url]);
    let out = run(cmd, &format!("git ls-remote {url}"))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (oid, name) = l.split_once('\t')?;
            Some((oid.to_owned(), name.to_owned()))
        })
        .collect())
}

/// The refs of a local repository (`git for-each-ref`), as `(oid, refname)`.
pub fn local_refs(repo: &Path) -> Result<Vec<(String, String)>> {
    let mut cmd = git_cmd();
    cmd.arg("-C")
        .arg(repo)
        .args(["for-each-ref", "--format=%(objectname)\t%(refname)"]);
    let out = run(cmd, "git for-each-ref")?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (oid, name) = l.split_once('\t')?;
            Some((oid.to_owned(), name.to_owned()))
        })
        .collect())
}

/// Where the local copy lives in the work directory.
pub fn mirror_path(work: &Path) -> PathBuf {
    work.join("mirror.git")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_objects_fields() {
        let text = "count: 3\nsize: 12\nin-pack: 22434\npacks: 1\nsize-pack: 9695\n\
                    prune-packable: 0\ngarbage: 0\nsize-garbage: 0\n";
        assert_eq!(
            parse_count_objects(text, 9_900_000),
            PackStats {
                objects: 22437,
                pack_bytes: 9_900_000 + 12 * 1024
            }
        );
    }

    #[test]
    fn refspec_sources_name_refs_or_nothing() {
        let specs = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            refspec_sources(&specs(&["refs/heads/*:refs/heads/*", "+refs/tags/*"])),
            Some(specs(&["refs/heads/*", "refs/tags/*"]))
        );
        assert_eq!(refspec_sources(&specs(&["HEAD:refs/heads/main"])), None);
        assert_eq!(refspec_sources(&specs(&[":refs/heads/gone"])), None);
    }
}

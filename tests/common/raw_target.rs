//! A raw receive-pack target for the hostile-input tests: gitstow (the
//! default) or, with `HOSTILE_CANONICAL=PORT:ROOT`, an external canonical
//! `git http-backend` (`python3 ../shared/tools/git-http-backend-server.py ROOT PORT`),
//! and a repository pushed with git (main = C1 - C2) to send requests to.

use std::path::PathBuf;

use super::*;

pub fn canonical() -> Option<(u16, PathBuf)> {
    let v = std::env::var("HOSTILE_CANONICAL").ok()?;
    let (port, root) = v.split_once(':')?;
    Some((port.parse().ok()?, PathBuf::from(root)))
}

pub enum Target {
    Gitstow(Server),
    Canonical { port: u16, root: PathBuf },
}

impl Target {
    pub fn start(extra: &[&str]) -> Target {
        match canonical() {
            Some((port, root)) => Target::Canonical { port, root },
            None => Target::Gitstow(Server::start_with(extra)),
        }
    }
    pub fn port(&self) -> u16 {
        match self {
            Target::Gitstow(s) => s.port(),
            Target::Canonical { port, .. } => *port,
        }
    }
    pub fn url(&self, repo: &str) -> String {
        format!("http://127.0.0.1:{}/{repo}.git", self.port())
    }
    pub fn is_canonical(&self) -> bool {
        matches!(self, Target::Canonical { .. })
    }
    /// canonical only: `git config` in the bare repository.
    pub fn config(&self, repo: &str, key: &str, value: &str) {
        if let Target::Canonical { root, .. } = self {
            let dir = root.join(format!("{repo}.git"));
            git(&dir, &["config", key, value]);
        }
    }
}

/// A repository pushed with git: main = C1 - C2.
pub struct Setup {
    pub target: Target,
    pub tmp: tempfile::TempDir,
    pub repo: String,
    pub url: String,
    pub c1: String,
    pub c2: String,
    pub before: String,
}

pub fn setup(name: &str) -> Setup {
    setup_with(name, &[])
}

pub fn setup_with(name: &str, extra: &[&str]) -> Setup {
    let target = Target::start(extra);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    let c1 = commit_files(&work, &[("a.txt", "one\n")], "C1");
    let c2 = commit_files(&work, &[("a.txt", "one\ntwo\n")], "C2");
    let repo = if target.is_canonical() {
        format!("{name}-{}", std::process::id())
    } else {
        name.to_owned()
    };
    let url = target.url(&repo);
    git(&work, &["push", "--quiet", &url, "main"]);
    let before = ls_remote(&url);
    Setup {
        target,
        tmp,
        repo,
        url,
        c1,
        c2,
        before,
    }
}

impl Setup {
    /// True when the target is canonical git.
    pub fn canonical(&self) -> bool {
        self.target.is_canonical()
    }

    /// canonical only: check objects as gitstow always does.
    pub fn fsck_objects(&self) {
        self.target
            .config(&self.repo, "receive.fsckObjects", "true");
    }

    /// POSTs `body` to the repository's receive-pack.
    pub fn post(&self, body: &[u8]) -> Response {
        http(
            self.target.port(),
            "POST",
            &format!("/{}.git/git-receive-pack", self.repo),
            &[
                ("Content-Type", "application/x-git-receive-pack-request"),
                ("Accept", "application/x-git-receive-pack-result"),
            ],
            body,
        )
    }
}

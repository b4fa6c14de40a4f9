//! One test body over both transports: a [`Remote`] is a running
//! `gitstow serve` reached over smart HTTP or over SSH (the real `ssh`
//! client, a key whose token may write `org/*`), with `git` run so that it
//! reaches it; [`over_both_transports!`](crate::over_both_transports) makes
//! a test of each body for each transport.

use std::path::Path;
use std::process::Output;

use super::*;

/// How a test reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Smart HTTP, access control off (loopback).
    Http,
    /// SSH, as the `dev` key of [`Ssh::start_admin`] (an admin of
    /// `org/*`, so that no protected ref holds it back: as HTTP with access
    /// control off).
    Ssh,
}

/// A server reached over one transport.
pub enum Remote {
    /// Over smart HTTP.
    Http(Server),
    /// Over SSH.
    Ssh(Ssh),
}

impl Remote {
    /// A fresh server for `transport`.
    pub fn start(transport: Transport) -> Remote {
        match transport {
            Transport::Http => Remote::Http(Server::start()),
            Transport::Ssh => Remote::Ssh(Ssh::start_admin()),
        }
    }

    /// The URL of repository `name` (over SSH, `org/name`: where the key
    /// may write).
    pub fn url(&self, name: &str) -> String {
        match self {
            Remote::Http(s) => s.url(name),
            Remote::Ssh(s) => s.url(&format!("org/{name}")),
        }
    }

    /// What git needs in its environment to reach the server.
    fn env(&self) -> Vec<(String, String)> {
        match self {
            Remote::Http(_) => Vec::new(),
            Remote::Ssh(s) => vec![("GIT_SSH_COMMAND".into(), ssh_command(&s.dev))],
        }
    }

    /// git in `dir`, whatever its outcome.
    pub fn run(&self, dir: &Path, args: &[&str]) -> Output {
        git_cmd(dir)
            .args(args)
            .envs(self.env())
            .output()
            .expect("run git")
    }

    /// git in `dir`, asserted to succeed.
    pub fn git(&self, dir: &Path, args: &[&str]) -> Output {
        let out = self.run(dir, args);
        assert!(
            out.status.success(),
            "git {} failed:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// git in `dir`, asserted to fail; its stderr.
    pub fn git_fail(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.run(dir, args);
        assert!(
            !out.status.success(),
            "git {} succeeded:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// `git ls-remote url` (lines `oid\tref`).
    pub fn ls_remote(&self, url: &str) -> String {
        let out = self.git(home(), &["ls-remote", url]);
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
    }

    /// The oid `name` has on `url`, if any.
    pub fn remote_ref(&self, url: &str, name: &str) -> Option<String> {
        self.ls_remote(url)
            .lines()
            .find(|l| l.split('\t').nth(1) == Some(name))
            .map(|l| l.split('\t').next().unwrap().to_owned())
    }
}

/// For each named function `fn NAME(remote: &Remote)`, a test
/// `over_http::NAME` and a test `over_ssh::NAME` that run it on a fresh
/// server of that transport.
#[macro_export]
macro_rules! over_both_transports {
    ($($name:ident),* $(,)?) => {
        mod over_http {
            $(
                #[test]
                fn $name() {
                    super::$name(&$crate::common::Remote::start($crate::common::Transport::Http));
                }
            )*
        }
        mod over_ssh {
            $(
                #[test]
                fn $name() {
                    super::$name(&$crate::common::Remote::start($crate::common::Transport::Ssh));
                }
            )*
        }
    };
}

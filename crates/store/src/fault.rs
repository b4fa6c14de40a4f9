//! Fault injection: a store wrapper that fails or delays chosen requests, so
//! tests can check that a push either lands whole or changes nothing.
//!
//! A spec is a `;`-separated list of rules `OP:KEY-SUBSTRING:ACTION[:TIMES[:SKIP]]`:
//! - `OP`: `put`, `put_file`, `get`, `get_range`, `head`, `list`, `delete` or `*`;
//! - `KEY-SUBSTRING`: the rule applies to keys containing it (empty: every key);
//! - `ACTION`: `fail` (an I/O error, nothing done), `unavailable` (a store
//!   that does not answer: [`Error::Backend`] with `unavailable`, nothing
//!   done), `fail-after` (the request
//!   is carried out, then an I/O error is returned: the ambiguous failure of a
//!   timeout after the server applied a write), `delay=<ms>`, `kill` (the
//!   process sends itself SIGKILL before the request: a crash at that point)
//!   or `kill-after` (SIGKILL right after the request is carried out);
//! - `TIMES`: how many matching requests the rule hits (default: all);
//! - `SKIP`: how many matching requests pass untouched first (default 0).
//!
//! Example: `put:/state:fail` (every state commit fails),
//! `put_file:.bin:fail:1` (the first container upload fails once).

use std::fs::File;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::{ETag, Error, ObjectMeta, ObjectStore, PutCondition, Result, StoreMetrics};

/// What a rule does to a request it hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Return an I/O error without doing anything.
    Fail,
    /// Return an unavailable-store error without doing anything.
    Unavailable,
    /// Do the request, then return an I/O error.
    FailAfter,
    /// Sleep, then do the request.
    Delay(Duration),
    /// SIGKILL the process before the request.
    Kill,
    /// Do the request, then SIGKILL the process.
    KillAfter,
}

/// Ends the process at once, as a crash or `kill -9` would (no destructors,
/// no buffered output flushed).
fn kill_self() -> ! {
    // SAFETY: kill(2) on our own pid has no memory-safety preconditions.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// One fault rule.
#[derive(Debug)]
pub struct Rule {
    op: String,
    key: String,
    action: Action,
    times: Option<u32>,
    skip: u32,
    seen: AtomicU32,
}

impl Rule {
    fn hits(&self, op: &str, key: &str) -> Option<Action> {
        if (self.op != "*" && self.op != op) || !key.contains(&self.key) {
            return None;
        }
        let n = self.seen.fetch_add(1, Ordering::SeqCst);
        if n < self.skip {
            return None;
        }
        match self.times {
            Some(t) if n - self.skip >= t => None,
            _ => Some(self.action),
        }
    }
}

/// Parses a fault spec (see the module docs).
pub fn parse(spec: &str) -> std::result::Result<Vec<Rule>, String> {
    spec.split(';')
        .filter(|r| !r.trim().is_empty())
        .map(|r| {
            let parts: Vec<&str> = r.trim().split(':').collect();
            if parts.len() < 3 || parts.len() > 5 {
                return Err(format!(
                    "fault rule {r:?}: want OP:KEY:ACTION[:TIMES[:SKIP]]"
                ));
            }
            let op = parts[0];
            if ![
                "put",
                "put_file",
                "get",
                "get_range",
                "head",
                "list",
                "delete",
                "*",
            ]
            .contains(&op)
            {
                return Err(format!("fault rule {r:?}: unknown operation {op:?}"));
            }
            let action = match parts[2] {
                "fail" => Action::Fail,
                "unavailable" => Action::Unavailable,
                "fail-after" => Action::FailAfter,
                "kill" => Action::Kill,
                "kill-after" => Action::KillAfter,
                a => match a
                    .strip_prefix("delay=")
                    .and_then(|ms| ms.trim_end_matches("ms").parse().ok())
                {
                    Some(ms) => Action::Delay(Duration::from_millis(ms)),
                    None => return Err(format!("fault rule {r:?}: unknown action {a:?}")),
                },
            };
            let num = |i: usize| -> std::result::Result<Option<u32>, String> {
                parts
                    .get(i)
                    .map(|s| {
                        s.parse()
                            .map_err(|_| format!("fault rule {r:?}: {s:?} is not a count"))
                    })
                    .transpose()
            };
            Ok(Rule {
                op: op.to_owned(),
                key: parts[1].to_owned(),
                action,
                times: num(3)?,
                skip: num(4)?.unwrap_or(0),
                seen: AtomicU32::new(0),
            })
        })
        .collect()
}

/// A store that applies fault rules before passing requests to `inner`.
#[derive(Debug)]
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    rules: Vec<Rule>,
}

impl FaultyStore {
    /// Wraps `inner` with the rules of `spec`.
    pub fn new(inner: Arc<dyn ObjectStore>, spec: &str) -> std::result::Result<Self, String> {
        Ok(FaultyStore {
            inner,
            rules: parse(spec)?,
        })
    }

    fn run<T>(&self, op: &str, key: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let action = self.rules.iter().find_map(|r| r.hits(op, key));
        let injected = || Error::Io {
            key: key.to_owned(),
            source: std::io::Error::other(format!("injected fault on {op} {key}")),
        };
        match action {
            None => f(),
            Some(Action::Fail) => Err(injected()),
            Some(Action::Unavailable) => Err(Error::Backend {
                op: "injected",
                key: key.to_owned(),
                message: "injected: the store does not answer".into(),
                unavailable: true,
            }),
            Some(Action::FailAfter) => {
                let _ = f();
                Err(injected())
            }
            Some(Action::Delay(d)) => {
                std::thread::sleep(d);
                f()
            }
            Some(Action::Kill) => kill_self(),
            Some(Action::KillAfter) => {
                let _ = f();
                kill_self()
            }
        }
    }
}

impl ObjectStore for FaultyStore {
    fn put(&self, key: &str, data: &[u8], condition: PutCondition) -> Result<ETag> {
        self.run("put", key, || self.inner.put(key, data, condition))
    }
    fn put_file(&self, key: &str, path: &Path) -> Result<ETag> {
        self.run("put_file", key, || self.inner.put_file(key, path))
    }
    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, ETag)>> {
        self.run("get", key, || self.inner.get(key))
    }
    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Vec<u8>> {
        self.run("get_range", key, || self.inner.get_range(key, range))
    }
    fn get_range_into(&self, key: &str, range: Range<u64>, buf: &mut Vec<u8>) -> Result<()> {
        buf.clear();
        let read = self.run("get_range", key, || {
            self.inner.get_range_into(key, range, buf)
        });
        if read.is_err() {
            // A fault injected after the read (`fail-after`) leaves no bytes.
            buf.clear();
        }
        read
    }
    fn head(&self, key: &str) -> Result<Option<ObjectMeta>> {
        self.run("head", key, || self.inner.head(key))
    }
    fn head_in_store(&self, key: &str) -> Result<Option<ObjectMeta>> {
        self.run("head", key, || self.inner.head_in_store(key))
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.run("list", prefix, || self.inner.list(prefix))
    }
    fn delete(&self, key: &str) -> Result<()> {
        self.run("delete", key, || self.inner.delete(key))
    }
    fn get_to_file(&self, key: &str, file: &mut File) -> Result<Option<ObjectMeta>> {
        self.run("get", key, || self.inner.get_to_file(key, file))
    }
    fn discard_local_copy(&self, key: &str) {
        self.inner.discard_local_copy(key)
    }
    fn presign(
        &self,
        request: crate::PresignRequest<'_>,
        ttl: std::time::Duration,
    ) -> Result<Option<crate::Presigned>> {
        self.run("presign", request.key(), || {
            self.inner.presign(request, ttl)
        })
    }
    fn copy(&self, from: &str, to: &str) -> Result<ETag> {
        self.run("copy", to, || self.inner.copy(from, to))
    }
    fn sha256(&self, key: &str) -> Result<Option<[u8; 32]>> {
        self.run("head", key, || self.inner.sha256(key))
    }

    fn metrics(&self) -> StoreMetrics {
        self.inner.metrics()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FsStore;

    #[test]
    fn rules_hit_as_specified() {
        let dir = tempfile::tempdir().unwrap();
        let inner: Arc<dyn ObjectStore> = Arc::new(FsStore::new(dir.path()).unwrap());
        let s = FaultyStore::new(inner.clone(), "put:state:fail:2:1;get:x:fail-after").unwrap();
        assert!(s.put("r/state", b"1", PutCondition::None).is_ok()); // skipped
        assert!(s.put("r/state", b"2", PutCondition::None).is_err());
        assert!(s.put("r/state", b"3", PutCondition::None).is_err());
        assert!(s.put("r/state", b"4", PutCondition::None).is_ok()); // times exhausted
        assert_eq!(inner.get("r/state").unwrap().unwrap().0, b"4");
        assert!(s.get("x").is_err());
        assert!(s.put("other", b"1", PutCondition::None).is_ok());
        assert!(parse("bogus").is_err());
        assert!(parse("put:k:explode").is_err());
        assert_eq!(
            parse("get::delay=5ms").unwrap()[0].action,
            Action::Delay(Duration::from_millis(5))
        );
    }
}

//! Decoded states shared by the requests of a server.
//!
//! Every request reads the state object (one GET: it must see the newest
//! version; a conditional one, `If-None-Match` the version kept, so an
//! unchanged state is not even transferred from S3), but decoding it (zstd, JSON, every ref's hex oid) costs time
//! that grows with the number of refs, and a fetch reads it at least twice
//! (the advertisement, then the negotiation or `ls-refs`). A state object is
//! immutable under its ETag, so the decoded state is kept per repository and
//! reused while the ETag is unchanged. Memory is bounded by an estimate of
//! the decoded size: past the budget, the entries used longest ago go.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use gitstow_store::ETag;

use crate::state::RepoState;

/// Bytes of decoded states the default [`StateCache`] holds.
pub const DEFAULT_STATE_CACHE_BYTES: usize = 64 << 20;

/// Decoded states by state key, each with the ETag it was decoded at.
#[derive(Debug)]
pub struct StateCache {
    inner: Mutex<Inner>,
    max_bytes: usize,
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<String, Entry>,
    bytes: usize,
    clock: u64,
}

#[derive(Debug)]
struct Entry {
    etag: ETag,
    state: Arc<RepoState>,
    weight: usize,
    used: u64,
}

impl StateCache {
    /// An empty cache of at most [`DEFAULT_STATE_CACHE_BYTES`].
    pub fn new() -> Arc<Self> {
        Self::with_limit(DEFAULT_STATE_CACHE_BYTES)
    }

    /// An empty cache of at most `max_bytes` of decoded states (estimated;
    /// `0` keeps nothing). A state larger than the budget is not kept.
    pub fn with_limit(max_bytes: usize) -> Arc<Self> {
        Arc::new(StateCache {
            inner: Mutex::new(Inner::default()),
            max_bytes,
        })
    }

    /// The state decoded for `key` at `etag`, if kept.
    #[cfg(test)]
    fn get(&self, key: &str, etag: &ETag) -> Option<Arc<RepoState>> {
        self.latest(key)
            .filter(|(kept, _)| kept == etag)
            .map(|(_, state)| state)
    }

    /// The version kept for `key`, if any, with its state.
    pub(crate) fn latest(&self, key: &str) -> Option<(ETag, Arc<RepoState>)> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.clock += 1;
        let now = inner.clock;
        let entry = inner.map.get_mut(key)?;
        entry.used = now;
        Some((entry.etag.clone(), entry.state.clone()))
    }

    /// Keeps `state`, decoded for `key` at `etag` (replacing an older version).
    pub(crate) fn insert(&self, key: &str, etag: ETag, state: Arc<RepoState>) {
        let weight = state.approximate_bytes();
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = inner.map.remove(key) {
            inner.bytes -= old.weight;
        }
        if weight > self.max_bytes {
            return;
        }
        while inner.bytes + weight > self.max_bytes {
            let Some(oldest) = inner
                .map
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(gone) = inner.map.remove(&oldest) {
                inner.bytes -= gone.weight;
            }
        }
        inner.clock += 1;
        let used = inner.clock;
        inner.bytes += weight;
        inner.map.insert(
            key.to_owned(),
            Entry {
                etag,
                state,
                weight,
                used,
            },
        );
    }

    /// Estimated bytes held.
    pub fn bytes(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(refs: usize) -> Arc<RepoState> {
        let mut s = RepoState::default();
        for i in 0..refs {
            s.refs.insert(
                format!("refs/tags/v{i}"),
                gix_hash::ObjectId::null(gix_hash::Kind::Sha1),
            );
        }
        Arc::new(s)
    }

    #[test]
    fn a_state_is_reused_only_at_its_etag() {
        let cache = StateCache::new();
        let s = state(3);
        cache.insert("a.git/state", ETag("1".into()), s.clone());
        assert!(Arc::ptr_eq(
            &cache.get("a.git/state", &ETag("1".into())).unwrap(),
            &s
        ));
        assert!(cache.get("a.git/state", &ETag("2".into())).is_none());
        assert!(cache.get("b.git/state", &ETag("1".into())).is_none());
        cache.insert("a.git/state", ETag("2".into()), state(4));
        assert!(cache.get("a.git/state", &ETag("1".into())).is_none());
        assert_eq!(
            cache
                .get("a.git/state", &ETag("2".into()))
                .unwrap()
                .refs
                .len(),
            4
        );
    }

    #[test]
    fn the_budget_drops_the_least_recently_used() {
        let one = state(100).approximate_bytes();
        let cache = StateCache::with_limit(one * 2 + one / 2);
        cache.insert("a", ETag("1".into()), state(100));
        cache.insert("b", ETag("1".into()), state(100));
        assert!(cache.get("a", &ETag("1".into())).is_some());
        cache.insert("c", ETag("1".into()), state(100));
        assert!(cache.get("a", &ETag("1".into())).is_some());
        assert!(cache.get("b", &ETag("1".into())).is_none());
        assert!(cache.get("c", &ETag("1".into())).is_some());
        assert!(cache.bytes() <= one * 2 + one / 2);
        let none = StateCache::with_limit(0);
        none.insert("a", ETag("1".into()), state(1));
        assert!(none.get("a", &ETag("1".into())).is_none());
        assert_eq!(none.bytes(), 0);
    }
}

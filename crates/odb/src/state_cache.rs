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
    /// Decodes under way, by state key: concurrent readers of one version
    /// wait for the first one's result instead of decoding it again (a
    /// flood of listings of a repository of a million refs would otherwise
    /// hold one decoded copy per request).
    flights: Mutex<HashMap<String, Arc<Flight>>>,
}

/// One decode of one version of a state, shared by whoever asks meanwhile.
#[derive(Debug)]
struct Flight {
    etag: ETag,
    result: Mutex<Option<Arc<RepoState>>>,
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
            flights: Mutex::new(HashMap::new()),
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
    /// The state of `key` at `etag`, decoded by `decode` once however many
    /// callers ask at the same time: the first decodes (and keeps the
    /// result in the cache when it fits), the others wait and share it. A
    /// failed decode is not shared: each waiter then tries itself.
    ///
    /// # Errors
    /// What `decode` returned.
    pub(crate) fn decode_once<E>(
        &self,
        key: &str,
        etag: &ETag,
        decode: impl FnOnce() -> Result<RepoState, E>,
    ) -> Result<Arc<RepoState>, E> {
        let flight = {
            let mut flights = self.flights.lock().unwrap_or_else(|p| p.into_inner());
            match flights.get(key) {
                Some(f) if &f.etag == etag => f.clone(),
                _ => {
                    let f = Arc::new(Flight {
                        etag: etag.clone(),
                        result: Mutex::new(None),
                    });
                    flights.insert(key.to_owned(), f.clone());
                    f
                }
            }
        };
        let mut result = flight.result.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(state) = result.as_ref() {
            return Ok(state.clone());
        }
        let decoded = decode().map(Arc::new);
        if let Ok(state) = &decoded {
            *result = Some(state.clone());
            self.insert(key, etag.clone(), state.clone());
        }
        drop(result);
        // Later readers find it in the cache (or decode anew, when it is
        // over the budget): the flight only serves those already waiting.
        let mut flights = self.flights.lock().unwrap_or_else(|p| p.into_inner());
        if flights.get(key).is_some_and(|f| Arc::ptr_eq(f, &flight)) {
            flights.remove(key);
        }
        decoded
    }

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

    /// Concurrent readers of one version decode it once.
    #[test]
    fn concurrent_readers_decode_once() {
        let cache = StateCache::with_limit(0); // nothing kept: only the flight shares
        let decodes = std::sync::atomic::AtomicUsize::new(0);
        let etag = ETag("\"v1\"".into());
        let start = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    start.wait();
                    let got = cache
                        .decode_once::<()>("r.git/state", &etag, || {
                            decodes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(500));
                            Ok((*state(3)).clone())
                        })
                        .unwrap();
                    assert_eq!(got.refs.len(), 3);
                });
            }
        });
        // All eight start together and overlap the first decode (500 ms):
        // they share it, though the cache keeps nothing here.
        assert_eq!(decodes.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}

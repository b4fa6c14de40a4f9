//! The deliverer: a background thread per server that POSTs outbox entries
//! ([`crate::outbox`]) to their webhooks, at least once.
//!
//! It looks at the outbox when a local push records an entry, and every
//! [`DeliverConfig::scan_every`] for the rest (entries of other instances
//! of the bucket, retries, entries left by a server that stopped); while
//! scans find the outbox empty, the wait doubles up to
//! [`DeliverConfig::idle_scan_max`] (an idle instance lists the bucket a
//! few times an hour, not 17,000 times a day), and a local push or an entry
//! found brings it back. (Each instance is woken by its own pushes, so an
//! event waits for a scan only when its pusher stopped first.) For each
//! entry nobody holds a lease on:
//! - an entry whose push outcome was never recorded (its pusher stopped
//!   between writing it and committing or after) is *recovered* from the
//!   repository's refs: an update landed if the ref now has its new value,
//!   or a value that is neither its old nor its new one (moved again since:
//!   announced rather than lost); one whose ref still has its old value
//!   did not. The event says `"recovered": true`;
//! - it takes a lease by a conditional PUT (another instance that got there
//!   first wins; the loser skips the entry), POSTs to each webhook whose
//!   delivery is due, and writes back what is still owed: a failed attempt
//!   is retried after 2, 4, 8 … seconds (at most [`MAX_BACKOFF_SECS`]),
//!   up to [`DeliverConfig::max_attempts`] attempts (about 4 hours at the
//!   default), then dropped with an error in the log.
//!
//! Deliveries never touch the push path: a slow or dead receiver delays only
//! other deliveries. Counted in `gitstow_webhook_deliveries_total{result}`
//! (`delivered`, `retried`, `dropped`).

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use gitstow_access::AccessDoc;
use gitstow_odb::{IndexCache, Repository};
use gitstow_store::{ETag, ObjectStore, PutCondition};

use crate::outbox::{Entry, Outbox, Wake, OUTBOX_PREFIX};
use crate::webhook::{RefUpdateJson, MAX_ENTRY_BYTES};

/// Metric: deliveries by result.
pub const DELIVERIES: &str = "gitstow_webhook_deliveries_total";

/// Outbox entries handled at once.
pub const PARALLEL_ENTRIES: usize = 8;

/// Longest wait between two attempts, in seconds.
pub const MAX_BACKOFF_SECS: u64 = 600;

/// How deliveries are made.
#[derive(Debug, Clone)]
pub struct DeliverConfig {
    /// How long one POST may take in all.
    pub timeout: Duration,
    /// How often the outbox is listed when nothing wakes the deliverer and
    /// the last scan found entries.
    pub scan_every: Duration,
    /// The longest wait between scans that find the outbox empty.
    pub idle_scan_max: Duration,
    /// Attempts before a delivery is dropped.
    pub max_attempts: u32,
}

impl Default for DeliverConfig {
    fn default() -> Self {
        DeliverConfig {
            timeout: Duration::from_secs(10),
            scan_every: Duration::from_secs(5),
            idle_scan_max: Duration::from_secs(300),
            max_attempts: 30,
        }
    }
}

/// Handle of a running deliverer.
#[derive(Debug, Clone)]
pub struct Deliverer {
    store: Arc<dyn ObjectStore>,
    wake: Wake,
}

impl Deliverer {
    /// Starts the deliverer's thread for `store`.
    pub fn start(store: Arc<dyn ObjectStore>, config: DeliverConfig) -> std::io::Result<Self> {
        let (wake, woken) = std::sync::mpsc::sync_channel(1);
        let worker = Worker {
            store: store.clone(),
            agent: crate::agent(config.timeout),
            indexes: IndexCache::with_limit(1),
            config,
        };
        std::thread::Builder::new()
            .name("webhooks".into())
            .spawn(move || worker.run(woken))?;
        Ok(Deliverer { store, wake })
    }

    /// An outbox recording pushes for `webhooks` (names), delivered by this
    /// deliverer.
    pub fn outbox(&self, webhooks: Vec<String>) -> Outbox {
        Outbox::new(self.store.clone(), webhooks, Some(self.wake.clone()))
    }
}

struct Worker {
    store: Arc<dyn ObjectStore>,
    agent: ureq::Agent,
    indexes: Arc<IndexCache>,
    config: DeliverConfig,
}

impl Worker {
    fn run(self, woken: Receiver<()>) {
        let mut idle_wait = self.config.scan_every;
        loop {
            let (next_due, empty) = match self.scan() {
                Ok(scanned) => scanned,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook outbox not readable");
                    (None, false)
                }
            };
            let mut wait = self.config.scan_every;
            if empty {
                wait = idle_wait;
                idle_wait = (idle_wait * 2).min(self.config.idle_scan_max.max(wait));
            } else {
                idle_wait = self.config.scan_every;
            }
            if let Some(due) = next_due {
                let secs = due.saturating_sub(crate::now_secs());
                wait = wait.min(Duration::from_secs(secs));
            }
            match woken.recv_timeout(wait) {
                Ok(()) => idle_wait = self.config.scan_every,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    // Every handle is gone (tests): finish what is due, then stop.
                    if wait.is_zero() {
                        continue;
                    }
                    return;
                }
            }
        }
    }

    /// One pass over the outbox; returns when the next retry is due, and
    /// whether the outbox was empty.
    fn scan(&self) -> Result<(Option<u64>, bool), Box<dyn std::error::Error + Send + Sync>> {
        let keys = self.store.list(OUTBOX_PREFIX)?;
        if keys.is_empty() {
            return Ok((None, true));
        }
        let (doc, _) = gitstow_access::load(self.store.as_ref())?;
        // Entries are handled PARALLEL_ENTRIES at a time, so one slow
        // receiver does not hold back every other event.
        let next_due = std::sync::Mutex::new(None::<u64>);
        let queue = std::sync::Mutex::new(keys.into_iter());
        std::thread::scope(|s| {
            for _ in 0..PARALLEL_ENTRIES {
                s.spawn(|| loop {
                    let Some(key) = queue.lock().unwrap_or_else(|e| e.into_inner()).next() else {
                        return;
                    };
                    match self.entry(&key, &doc) {
                        Ok(Some(due)) => {
                            let mut next = next_due.lock().unwrap_or_else(|e| e.into_inner());
                            *next = Some(next.map_or(due, |d| d.min(due)));
                        }
                        Ok(None) => {}
                        Err(e) => {
                            tracing::warn!(key, error = %e, "webhook outbox entry not handled")
                        }
                    }
                });
            }
        });
        Ok((
            next_due.into_inner().unwrap_or_else(|e| e.into_inner()),
            false,
        ))
    }

    /// Handles one entry; returns when it is next due, if it stays.
    fn entry(
        &self,
        key: &str,
        doc: &AccessDoc,
    ) -> Result<Option<u64>, Box<dyn std::error::Error + Send + Sync>> {
        // An entry is small (one bounded event); a larger one, left by an
        // older version, is not read: each attempt would hold it in memory.
        if let Some(meta) = self.store.head(key)? {
            if meta.size > MAX_ENTRY_BYTES {
                tracing::error!(
                    key,
                    bytes = meta.size,
                    max = MAX_ENTRY_BYTES,
                    "webhook outbox entry over the size limit dropped unread"
                );
                metrics::counter!(DELIVERIES, "result" => "dropped").increment(1);
                self.store.delete(key)?;
                return Ok(None);
            }
        }
        let Some((bytes, etag)) = self.store.get(key)? else {
            return Ok(None);
        };
        let mut entry = match Entry::decode(&bytes) {
            Ok(e) => e,
            Err(e) => {
                tracing::error!(key, error = %e, "corrupt webhook outbox entry dropped");
                metrics::counter!(DELIVERIES, "result" => "dropped").increment(1);
                self.store.delete(key)?;
                return Ok(None);
            }
        };
        let now = crate::now_secs();
        if entry.lease_until > now {
            return Ok(Some(entry.lease_until));
        }
        if !entry.landed && !self.recover(&mut entry)? {
            self.store.delete(key)?;
            return Ok(None);
        }
        let Some(due_at) = entry.deliveries.iter().map(|d| d.next_attempt).min() else {
            self.store.delete(key)?;
            return Ok(None);
        };
        if due_at > now {
            return Ok(Some(due_at));
        }
        // The lease: nobody else attempts these deliveries meanwhile.
        entry.lease_until = now + 2 * self.config.timeout.as_secs() + 5;
        let claimed =
            match self
                .store
                .put(key, &entry.encode(), PutCondition::IfMatch(etag.clone()))
            {
                Ok(e) => e,
                Err(gitstow_store::Error::PreconditionFailed { .. }) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
        self.attempt(&mut entry, doc);
        entry.lease_until = 0;
        self.write_back(key, &entry, claimed)
    }

    /// Attempts every due delivery of `entry`, keeping those still owed.
    fn attempt(&self, entry: &mut Entry, doc: &AccessDoc) {
        let now = crate::now_secs();
        let body = serde_json::to_vec(&entry.event).expect("an event encodes");
        let event = &entry.event;
        // Each due delivery at once: a slow receiver does not delay the others.
        let results: Vec<Option<Result<(), crate::webhook::DeliveryError>>> =
            std::thread::scope(|s| {
                let handles: Vec<_> = entry
                    .deliveries
                    .iter()
                    .map(|d| {
                        let hook = doc.webhooks.iter().find(|w| w.name == d.webhook);
                        let due = d.next_attempt <= now;
                        let body = &body;
                        s.spawn(move || {
                            let hook = hook.filter(|_| due)?;
                            Some(crate::webhook::post(
                                &self.agent,
                                &hook.url,
                                &hook.secret,
                                (&event.id, &event.event),
                                body,
                            ))
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or(None))
                    .collect()
            });
        let mut results = results.into_iter();
        entry.deliveries.retain_mut(|d| {
            let result = results.next().flatten();
            if d.next_attempt > now {
                return true;
            }
            let Some(result) = result else {
                tracing::info!(webhook = d.webhook, event = event.id, "webhook removed; delivery dropped");
                return false;
            };
            d.attempts += 1;
            match result {
                Ok(()) => {
                    tracing::info!(
                        webhook = d.webhook,
                        event = event.id,
                        repo = event.repository,
                        attempts = d.attempts,
                        "webhook delivered"
                    );
                    metrics::counter!(DELIVERIES, "result" => "delivered").increment(1);
                    false
                }
                Err(e) if d.attempts >= self.config.max_attempts => {
                    tracing::error!(webhook = d.webhook, event = event.id, repo = event.repository, attempts = d.attempts, error = %e, "webhook delivery dropped");
                    metrics::counter!(DELIVERIES, "result" => "dropped").increment(1);
                    false
                }
                Err(e) => {
                    let backoff = (1u64 << d.attempts.min(20)).min(MAX_BACKOFF_SECS);
                    d.next_attempt = crate::now_secs() + backoff;
                    tracing::warn!(webhook = d.webhook, event = event.id, repo = event.repository, attempts = d.attempts, retry_in_secs = backoff, error = %e, "webhook delivery failed");
                    metrics::counter!(DELIVERIES, "result" => "retried").increment(1);
                    true
                }
            }
        });
    }

    fn write_back(
        &self,
        key: &str,
        entry: &Entry,
        claimed: ETag,
    ) -> Result<Option<u64>, Box<dyn std::error::Error + Send + Sync>> {
        if entry.deliveries.is_empty() {
            self.store.delete(key)?;
            return Ok(None);
        }
        self.store
            .put(key, &entry.encode(), PutCondition::IfMatch(claimed))?;
        Ok(entry.deliveries.iter().map(|d| d.next_attempt).min())
    }

    /// Works out which updates of an entry whose outcome was never recorded
    /// landed (see the module's documentation); false: none did.
    fn recover(&self, entry: &mut Entry) -> Result<bool, gitstow_odb::Error> {
        let repo = Repository::new(
            self.store.clone(),
            &entry.event.repository,
            self.indexes.clone(),
        );
        let state = repo.load_state()?.map(|v| v.state).unwrap_or_default();
        let refs = repo.refs(&state)?;
        let mut landed: Vec<RefUpdateJson> = Vec::new();
        for u in &entry.event.ref_updates {
            let now = refs.oid(&u.name)?.map(|o| o.to_string());
            let is = |v: &str| match &now {
                Some(n) => n == v,
                None => v.bytes().all(|b| b == b'0'),
            };
            if !is(&u.old) || is(&u.new) {
                landed.push(u.clone());
            }
        }
        tracing::info!(
            event = entry.event.id,
            repo = entry.event.repository,
            landed = landed.len(),
            of = entry.event.ref_updates.len(),
            "recovered a webhook outbox entry its pusher left unfinished"
        );
        if landed.is_empty() && entry.event.ref_updates_omitted == 0 {
            return Ok(false);
        }
        entry.event.ref_updates = landed;
        entry.event.recovered = true;
        entry.landed = true;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gitstow_receive::hooks::{Notify, PushInfo, RefUpdate};

    fn oid(byte: u8) -> gix_hash::ObjectId {
        gix_hash::ObjectId::from_bytes_or_panic(&[byte; 20])
    }

    /// A pusher that stopped between recording its event and recording
    /// the outcome: after the lease, the refs say which updates landed.
    #[test]
    fn an_unfinished_entry_is_recovered_from_the_refs() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> =
            Arc::new(gitstow_store::FsStore::new(dir.path()).unwrap());
        let null = gix_hash::ObjectId::null(gix_hash::Kind::Sha1);
        let updates = [
            // Landed: the ref has its new value.
            RefUpdate {
                name: "refs/heads/main".into(),
                old: null,
                new: oid(1),
            },
            // Did not land: the ref still has its old value.
            RefUpdate {
                name: "refs/heads/topic".into(),
                old: oid(2),
                new: oid(3),
            },
            // Moved again since: announced rather than lost.
            RefUpdate {
                name: "refs/heads/moved".into(),
                old: oid(4),
                new: oid(5),
            },
            // A deletion that landed.
            RefUpdate {
                name: "refs/heads/gone".into(),
                old: oid(6),
                new: null,
            },
        ];
        let outbox = Outbox::new(store.clone(), vec!["w".into()], None);
        let pending = outbox
            .prepare(&PushInfo {
                repository: "org/app",
                pusher: Some("ci"),
                updates: &updates,
                push_options: &[],
            })
            .unwrap();
        std::mem::forget(pending); // the pusher stops here
        let mut state = gitstow_odb::RepoState::default();
        state.refs.insert("refs/heads/main", oid(1));
        state.refs.insert("refs/heads/topic", oid(2));
        state.refs.insert("refs/heads/moved", oid(7));
        let repo = Repository::new(store.clone(), "org/app", IndexCache::with_limit(1));
        repo.commit_state(&state, None).unwrap();

        let keys = store.list(OUTBOX_PREFIX).unwrap();
        assert_eq!(keys.len(), 1);
        let (bytes, _) = store.get(&keys[0]).unwrap().unwrap();
        let mut entry = Entry::decode(&bytes).unwrap();
        assert!(!entry.landed);
        assert!(entry.lease_until > crate::now_secs(), "the pusher's lease");
        let worker = Worker {
            store: store.clone(),
            agent: crate::agent(Duration::from_secs(1)),
            indexes: IndexCache::with_limit(1),
            config: DeliverConfig::default(),
        };
        assert!(worker.recover(&mut entry).unwrap());
        let names: Vec<&str> = entry
            .event
            .ref_updates
            .iter()
            .map(|u| u.name.as_str())
            .collect();
        assert_eq!(
            names,
            ["refs/heads/main", "refs/heads/moved", "refs/heads/gone"]
        );
        assert!(entry.event.recovered && entry.landed);

        // Nothing landed: the entry is withdrawn.
        let mut none = Entry::decode(&bytes).unwrap();
        none.event.repository = "org/other".into();
        none.event
            .ref_updates
            .retain(|u| u.old.bytes().all(|b| b == b'0'));
        assert!(!worker.recover(&mut none).unwrap());
    }

    /// An entry over [`MAX_ENTRY_BYTES`] (an older version's, holding a
    /// huge event) is dropped unread; what `prepare` writes for a push of
    /// many long ref names and options stays under it.
    #[test]
    fn outbox_entries_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> =
            Arc::new(gitstow_store::FsStore::new(dir.path()).unwrap());
        let worker = Worker {
            store: store.clone(),
            agent: crate::agent(Duration::from_secs(1)),
            indexes: IndexCache::with_limit(1),
            config: DeliverConfig::default(),
        };
        let key = format!("{OUTBOX_PREFIX}000000000001-huge");
        let huge = vec![b' '; (MAX_ENTRY_BYTES + 1) as usize];
        store
            .put(&key, &huge, gitstow_store::PutCondition::None)
            .unwrap();
        let doc = AccessDoc::default();
        assert_eq!(worker.entry(&key, &doc).unwrap(), None);
        assert!(store.get(&key).unwrap().is_none(), "dropped");

        let updates: Vec<RefUpdate> = (0..2_000)
            .map(|i| RefUpdate {
                name: format!("refs/heads/{}{i}", "x".repeat(4_000)),
                old: oid(1),
                new: oid(2),
            })
            .collect();
        let options: Vec<String> = (0..1_000).map(|_| "o".repeat(65)).collect();
        let outbox = Outbox::new(store.clone(), vec!["w".into()], None);
        let pending = outbox
            .prepare(&PushInfo {
                repository: "org/app",
                pusher: None,
                updates: &updates,
                push_options: &options,
            })
            .unwrap();
        pending.finish(&updates);
        let keys = store.list(OUTBOX_PREFIX).unwrap();
        assert_eq!(keys.len(), 1);
        let (bytes, _) = store.get(&keys[0]).unwrap().unwrap();
        assert!((bytes.len() as u64) < MAX_ENTRY_BYTES, "{}", bytes.len());
        let entry = Entry::decode(&bytes).unwrap();
        assert!(entry.landed);
        assert_eq!(
            entry.event.ref_updates.len() + entry.event.ref_updates_omitted,
            2_000
        );
        assert!(entry.event.ref_updates_omitted > 0);
    }
}

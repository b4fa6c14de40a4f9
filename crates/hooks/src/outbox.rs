//! The outbox: one store object per event owed to webhooks (a push's, or
//! a paused mirror's, [`Outbox::mirror_paused`]), under
//! [`OUTBOX_PREFIX`] (the server's store-wide namespace).
//!
//! Life of an entry ([`Entry`]):
//! 1. [`Outbox::prepare`], before the state's compare-and-swap: written with
//!    the updates about to be committed, `landed: false`, and a lease of
//!    [`PREPARE_LEASE_SECS`] for the pushing server;
//! 2. after the transaction ([`Pending::finish`]): rewritten with the
//!    updates that landed, `landed: true`, no lease (or deleted: nothing
//!    landed), and the local deliverer is woken;
//! 3. [`crate::deliver`] POSTs it to each webhook, and deletes it once no
//!    delivery is owed.
//!
//! If the pushing server stops between 1 and 2, the entry's lease runs out
//! and any deliverer works out from the repository's refs which updates
//! landed (see [`crate::deliver`]): nothing that landed goes unannounced.

use std::sync::Arc;

use gitstow_receive::hooks::{Notify, Pending, PushInfo, RefUpdate};
use gitstow_store::{ObjectStore, PutCondition};

use crate::webhook::{bounded_options, bounded_updates, MirrorJson, PushEvent};

/// Where entries live in the store.
pub const OUTBOX_PREFIX: &str = ".gitstow/outbox/";

/// How long (seconds) an entry written before a commit belongs to the
/// pushing server: the longest a state compare-and-swap (with its retries)
/// is expected to take. After it, deliverers recover the entry.
pub const PREPARE_LEASE_SECS: u64 = 120;

/// An outbox entry (JSON).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    /// The event to deliver.
    pub event: PushEvent,
    /// False while the push's outcome is not recorded yet.
    pub landed: bool,
    /// The deliveries still owed.
    pub deliveries: Vec<Delivery>,
    /// Until when (seconds since the epoch) the entry is someone's: the
    /// pusher's before it records the outcome, a deliverer's during an
    /// attempt. Nobody else touches it until then.
    pub lease_until: u64,
}

/// A delivery still owed to one webhook.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Delivery {
    /// The webhook's name in the access document (its URL and secret are
    /// read from there when the delivery is attempted).
    pub webhook: String,
    /// Attempts made.
    pub attempts: u32,
    /// Not before (seconds since the epoch).
    pub next_attempt: u64,
}

impl Entry {
    /// The entry's key: the push time first, so a listing gives the oldest
    /// first.
    pub fn key(&self) -> String {
        format!(
            "{OUTBOX_PREFIX}{:012}-{}",
            self.event.pushed_at, self.event.id
        )
    }

    /// Encodes the entry.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an entry encodes")
    }

    /// Decodes an entry.
    pub fn decode(bytes: &[u8]) -> Result<Entry, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

/// Wakes the deliverer of this process (see [`crate::deliver::Deliverer`]).
pub type Wake = std::sync::mpsc::SyncSender<()>;

/// Records a push's event for the webhooks `webhooks` (by name) in the store.
#[derive(Debug, Clone)]
pub struct Outbox {
    store: Arc<dyn ObjectStore>,
    webhooks: Vec<String>,
    wake: Option<Wake>,
}

impl Outbox {
    /// A delivery owed from `now` to each of this outbox's webhooks.
    fn deliveries(&self, now: u64) -> Vec<Delivery> {
        self.webhooks
            .iter()
            .map(|w| Delivery {
                webhook: w.clone(),
                attempts: 0,
                next_attempt: now,
            })
            .collect()
    }

    /// An outbox for a push whose repository `webhooks` (names) receive;
    /// `wake` is told when an entry is ready.
    pub fn new(store: Arc<dyn ObjectStore>, webhooks: Vec<String>, wake: Option<Wake>) -> Self {
        Outbox {
            store,
            webhooks,
            wake,
        }
    }
}

impl Outbox {
    /// Records that `repository`'s `mirror` paused (an event of kind
    /// [`crate::webhook::EVENT_MIRROR_PAUSED`], owed at once to this
    /// outbox's webhooks) and wakes the deliverer; nothing when there are
    /// no webhooks.
    ///
    /// # Errors
    /// The store failed (the event is not recorded).
    pub fn mirror_paused(&self, repository: &str, mirror: MirrorJson) -> std::io::Result<()> {
        if self.webhooks.is_empty() {
            return Ok(());
        }
        let now = crate::now_secs();
        let entry = Entry {
            event: PushEvent {
                id: random_id()?,
                event: crate::webhook::EVENT_MIRROR_PAUSED.into(),
                repository: repository.to_owned(),
                pusher: None,
                ref_updates: Vec::new(),
                ref_updates_omitted: 0,
                push_options: Vec::new(),
                pushed_at: now,
                recovered: false,
                mirror: Some(mirror),
            },
            landed: true,
            deliveries: self.deliveries(now),
            lease_until: 0,
        };
        self.store
            .put(&entry.key(), &entry.encode(), PutCondition::IfAbsent)
            .map_err(io_error)?;
        if let Some(wake) = &self.wake {
            let _ = wake.try_send(());
        }
        Ok(())
    }
}

fn random_id() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(hex::encode(bytes))
}

fn io_error(e: gitstow_store::Error) -> std::io::Error {
    match e {
        gitstow_store::Error::Io { source, .. } => source,
        other => std::io::Error::other(other),
    }
}

impl Notify for Outbox {
    fn prepare(&self, push: &PushInfo<'_>) -> std::io::Result<Box<dyn Pending>> {
        let now = crate::now_secs();
        let (ref_updates, ref_updates_omitted) = bounded_updates(push.updates);
        let entry = Entry {
            event: PushEvent {
                id: random_id()?,
                event: crate::webhook::EVENT_PUSH.into(),
                repository: push.repository.to_owned(),
                pusher: push.pusher.map(str::to_owned),
                ref_updates,
                ref_updates_omitted,
                push_options: bounded_options(push.push_options),
                pushed_at: now,
                recovered: false,
                mirror: None,
            },
            landed: false,
            deliveries: self.deliveries(now),
            lease_until: now + PREPARE_LEASE_SECS,
        };
        let key = entry.key();
        self.store
            .put(&key, &entry.encode(), PutCondition::IfAbsent)
            .map_err(io_error)?;
        Ok(Box::new(PendingEntry {
            store: self.store.clone(),
            key,
            entry,
            wake: self.wake.clone(),
        }))
    }
}

struct PendingEntry {
    store: Arc<dyn ObjectStore>,
    key: String,
    entry: Entry,
    wake: Option<Wake>,
}

impl Pending for PendingEntry {
    fn finish(self: Box<Self>, landed: &[RefUpdate]) {
        let PendingEntry {
            store,
            key,
            mut entry,
            wake,
        } = *self;
        if landed.is_empty() {
            if let Err(e) = store.delete(&key) {
                // Recovered later: the refs say nothing landed.
                tracing::warn!(key, error = %e, "withdrawing an outbox entry failed");
            }
            return;
        }
        entry.landed = true;
        entry.lease_until = 0;
        (entry.event.ref_updates, entry.event.ref_updates_omitted) = bounded_updates(landed);
        match store.put(&key, &entry.encode(), PutCondition::None) {
            Ok(_) => {
                if let Some(w) = wake {
                    let _ = w.try_send(());
                }
            }
            // Recovered after the lease from the refs.
            Err(e) => {
                tracing::warn!(key, error = %e, "recording a push's outcome in the outbox failed")
            }
        }
    }
}

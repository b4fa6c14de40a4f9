//! receive-pack requests (gitprotocol-pack(5)): a spooled push queued for a
//! push slot and handed to [`gitstow_receive::receive_pack`] with the
//! caller's protected refs, hidden refs, hooks and webhooks; its figures
//! counted, its access-log line written, automatic maintenance told.

use std::io::{Read, Write};
use std::sync::Arc;

use gitstow_odb::Repository;

use crate::maintenance::Maintenance;
use crate::metrics as m;
use crate::queue::{QueueTimeout, Slot};
use crate::{Fault, Host, Principal, Refusal};

/// A receive-pack request ready to run: its options (the caller's protected
/// and hidden refs, webhooks) and its push slot, or the queue timeout it
/// met (reported in the protocol, as `unpack` and `ng` lines).
#[derive(Debug)]
pub struct Push {
    repo: Repository,
    opts: gitstow_receive::Options,
    /// `None`: git's probe before a large push (a lone flush-pkt), which
    /// is not a push and takes no slot.
    slot: Option<Result<Slot, QueueTimeout>>,
    maintenance: Option<Arc<Maintenance>>,
    /// The repository's push mirror, made due once refs moved.
    push_mirror: Option<crate::mirrors::PushMirrorDue>,
    token: Option<String>,
}

/// Whether a receive-pack request of `bytes` bytes is git's probe before a
/// large push (`http.postBuffer`; over SSH too): a lone flush-pkt, 4 bytes
/// (or nothing).
pub fn is_probe(bytes: u64) -> bool {
    bytes <= 4
}

impl Host {
    /// Whether a push to `name` may go on before its request is read: the
    /// repository exists, or repositories are created on their first push.
    ///
    /// # Errors
    /// [`Refusal::NotFound`], or the store's failure.
    pub async fn push_target(&self, name: &str) -> Result<(), Refusal> {
        if self.config.auto_create {
            return Ok(());
        }
        match self.state(name).await? {
            Some(_) => Ok(()),
            None => Err(Refusal::NotFound(name.to_owned())),
        }
    }

    /// A receive-pack request of `principal` on repository `name`, whose
    /// request of `request_bytes` bytes is read (spooled) already: waits for
    /// a push slot unless it is git's probe before a large push (a lone
    /// flush-pkt, [`is_probe`]: it is not a push, so it neither queues nor
    /// counts).
    ///
    /// # Errors
    /// [`Refusal::Unavailable`] when the repository has webhooks and their
    /// deliveries are not running (a push is refused rather than landed
    /// unannounced).
    pub async fn push(
        &self,
        name: &str,
        principal: &Principal,
        request_bytes: u64,
    ) -> Result<Push, Refusal> {
        let probe = is_probe(request_bytes);
        let mut opts = self.config.receive.clone();
        opts.protect = principal
            .protect
            .clone()
            .map(|refs| gitstow_receive::protect::Protect { refs });
        opts.hidden = self.hidden(&opts.hidden, name, &principal.hide_refs);
        opts.pusher = principal.token.clone();
        if !principal.webhooks.is_empty() {
            match &self.webhooks {
                Some(d) => {
                    let outbox: Arc<dyn gitstow_receive::hooks::Notify> =
                        Arc::new(d.outbox(principal.webhooks.clone()));
                    opts.notify = Some(outbox);
                }
                None => {
                    tracing::error!(
                        repo = name,
                        "push refused: webhook deliveries are not running"
                    );
                    return Err(Refusal::Unavailable("server unavailable, try again later"));
                }
            }
        }
        let mut push_mirror = None;
        if !probe {
            // Two small documents, read at once.
            let (locked, mirrors) = tokio::join!(
                self.locked_by_others(name, principal),
                self.mirrors_of(name)
            );
            opts.locked = locked?;
            let mirrors = mirrors?;
            // A pull mirror takes no pushes (its refs come from the
            // upstream), an admin's neither: `gitstow mirror remove` first.
            opts.read_only = mirrors
                .pull
                .map(|m| crate::mirrors::pull_mirror_refusal(&m.url));
            if mirrors.push.is_some() {
                push_mirror = Some(self.push_mirror_due());
            }
        }
        let slot = if probe {
            None
        } else {
            Some(self.pushes.admit().await)
        };
        Ok(Push {
            repo: self.repo(name),
            opts,
            slot,
            maintenance: self.maintenance.clone(),
            push_mirror,
            token: principal.token.clone(),
        })
    }

    /// The paths of `name` locked (Git LFS) by others than `principal`:
    /// one read of the repository's lock document.
    ///
    /// # Errors
    /// The store failed or the document is corrupt (a push is refused
    /// rather than let past locks it could not read).
    async fn locked_by_others(
        &self,
        name: &str,
        principal: &Principal,
    ) -> Result<Vec<gitstow_receive::locked::LockedPath>, Refusal> {
        let repo = name.to_owned();
        let locks = self
            .read_store("reading the LFS locks", move |store| {
                gitstow_lfs::locks::all(store, &repo)
            })
            .await?;
        let me = principal
            .token
            .as_deref()
            .unwrap_or(gitstow_lfs::locks::ANONYMOUS);
        Ok(locks
            .into_iter()
            .filter(|l| l.owner.name != me)
            .map(|l| gitstow_receive::locked::LockedPath {
                path: l.path,
                owner: l.owner.name,
            })
            .collect())
    }

    /// Answers a push that cannot be read whole (the spool failed) from the
    /// command list at the start of `request`: `unpack <reason>` and
    /// `ng <ref> unpacker error` for each command, as git's receive-pack
    /// reports a failed index-pack; counted as a push.
    ///
    /// # Errors
    /// The command list is malformed ([`Fault::BadRequest`]), or writing
    /// failed.
    pub fn refuse_push(
        &self,
        request: &mut dyn Read,
        reason: &str,
        out: &mut dyn Write,
    ) -> Result<gitstow_receive::Outcome, Fault> {
        let started = std::time::Instant::now();
        let result = gitstow_receive::refuse_pack(request, out, reason, &self.config.receive);
        record_push(&result, started);
        result.map_err(|e| {
            tracing::warn!(error = %e, "refusing a push failed");
            Fault::of_push(&e)
        })
    }
}

impl Push {
    /// Runs receive-pack on the spooled `request` (commands, push options
    /// and pack as the client sent them), writing report-status to `out`;
    /// `truncated`: the request passed the size limit and was cut, so the
    /// pack is refused (`pack exceeds maximum allowed size`). Records the
    /// push's figures and access-log line and queues the repository for
    /// automatic maintenance when refs moved. Runs on a blocking thread.
    ///
    /// # Errors
    /// A malformed request ([`Fault::BadRequest`]) or a failure of the
    /// store or the writer ([`Fault::Server`]; logged with its chain).
    pub fn run(
        self,
        request: &std::fs::File,
        truncated: bool,
        out: &mut dyn Write,
    ) -> Result<gitstow_receive::Outcome, Fault> {
        let started = std::time::Instant::now();
        let (repo, opts) = (&self.repo, &self.opts);
        let probe = self.slot.is_none();
        let (result, _slot) = match self.slot {
            None => (
                gitstow_receive::receive_pack(repo, request, out, opts),
                None,
            ),
            Some(Err(busy)) => {
                tracing::warn!(repo = repo.name(), error = %busy, "push refused: queue timeout");
                let r = gitstow_receive::refuse_pack(request, out, &busy.to_string(), opts);
                (r, None)
            }
            Some(Ok(slot)) if truncated => {
                let reason = "pack exceeds maximum allowed size";
                let r = gitstow_receive::refuse_pack(request, out, reason, opts);
                (r, Some(slot))
            }
            Some(Ok(slot)) => (
                gitstow_receive::receive_pack(repo, request, out, opts),
                Some(slot),
            ),
        };
        if probe {
            // git's probe before a large push is not a push.
            return result.map_err(|e| Fault::of_push(&e));
        }
        record_push(&result, started);
        if let Ok(o) = &result {
            if o.updated > 0 {
                if let Some(maintenance) = &self.maintenance {
                    maintenance.after_push(repo.name());
                }
                if let Some(mirror) = &self.push_mirror {
                    mirror.pushed(repo.name());
                }
            }
        }
        match &result {
            Ok(o) => tracing::info!(
                repo = repo.name(),
                token = self.token.as_deref(),
                commands = o.commands,
                updated = o.updated,
                pack_bytes = o.pack_bytes,
                objects = o.objects,
                deltas = o.deltas,
                thin_bases = o.thin_bases,
                staged = o.staged,
                containers = o.containers,
                state_retries = o.state_retries,
                unpack_error = o.unpack_error.as_deref(),
                ms = started.elapsed().as_millis() as u64,
                "receive-pack"
            ),
            Err(e) => tracing::warn!(repo = repo.name(), error = %e, "receive-pack failed"),
        }
        result.map_err(|e| Fault::of_push(&e))
    }
}

/// Push figures for `/metrics`.
fn record_push(
    result: &Result<gitstow_receive::Outcome, gitstow_receive::Error>,
    started: std::time::Instant,
) {
    metrics::histogram!(m::PUSH_DURATION).record(started.elapsed().as_secs_f64());
    let label = match result {
        Ok(o) if o.unpack_error.is_none() && o.updated == o.commands => "ok",
        Ok(_) => "refused",
        Err(_) => "error",
    };
    metrics::counter!(m::PUSHES, "result" => label).increment(1);
    if let Ok(o) = result {
        metrics::counter!(m::OBJECTS_RESOLVED).increment(o.objects);
        metrics::counter!(m::DELTAS_RESOLVED).increment(o.deltas);
        metrics::counter!(m::CONTAINERS_UPLOADED).increment(o.containers as u64);
        metrics::counter!(m::CONTAINER_BYTES_UPLOADED).increment(o.container_bytes);
        metrics::counter!(m::STATE_CAS_RETRIES).increment(u64::from(o.state_retries));
    }
}

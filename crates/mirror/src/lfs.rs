//! The Git LFS objects of a mirror (plan 0017 step 5), through the other
//! server's batch API (git-lfs `docs/api/batch.md`, basic transfers):
//!
//! - a pull brings the objects that the pointer blobs it brought name
//!   ([`pointers_in`]: the blobs of at most 1 KiB of the containers the
//!   pull added), and those an earlier pull could not get: `download`
//!   batches of at most 100, each object `GET` from its action's `href`,
//!   hashed while it is spooled, then stored once per store and claimed
//!   by the repository as an upload is ([`gitstow_lfs::objects::accept`]);
//! - a push hands on every object the repository owns: `upload` batches
//!   (the remote answers with actions only for what it lacks), each `PUT`
//!   to its `href`, then `POST`ed to its `verify` action when it has one.
//!
//! An object that cannot be moved (the other server has no such object,
//! refuses it, or the transfer fails) is listed in [`LfsCopied::missing`],
//! never fails the sync: the git side stands, and the next sync tries it
//! again. The LFS endpoint is git-lfs's default for an HTTP(S) URL:
//! `<url>.git/info/lfs` (`<url>/info/lfs` when the URL ends in `.git`);
//! for an SSH one, what the server's `git-lfs-authenticate` answers
//! (`href` and the headers to send there).

use std::collections::BTreeMap;
use std::io::{Read, Seek, Write};
use std::path::Path;

use gitstow_lfs::{objects, pointer, Oid};
use gitstow_odb::state::RepoState;
use gitstow_odb::{ObjectCache, Repository};
use gitstow_store::ObjectStore;
use serde::{Deserialize, Serialize};

use crate::{Upstream, UpstreamError};

/// Objects a batch request names (git-lfs sends at most 100).
pub const BATCH_OBJECTS: usize = 100;

/// Most bytes of a batch answer read.
const MAX_ANSWER_BYTES: u64 = 16 << 20;

/// The media type of the LFS API.
const MEDIA_TYPE: &str = "application/vnd.git-lfs+json";

/// What moving a mirror's LFS objects did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LfsCopied {
    /// Objects moved.
    pub copied: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Objects that could not be moved, and why; retried at the next sync.
    pub missing: Vec<Missing>,
}

/// An LFS object a sync could not move.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Missing {
    /// Its oid (64 hex digits).
    pub oid: String,
    /// Its size in bytes, as its pointer says.
    pub size: u64,
    /// Why (the other server's words, or the transfer's failure).
    pub why: String,
}

impl Missing {
    fn new(oid: &Oid, size: u64, why: impl Into<String>) -> Self {
        Missing {
            oid: oid.to_string(),
            size,
            why: why.into(),
        }
    }
}

#[derive(Serialize)]
struct BatchRequest<'a> {
    operation: &'a str,
    transfers: [&'a str; 1],
    objects: Vec<Spec>,
    hash_algo: &'a str,
}

#[derive(Serialize)]
struct Spec {
    oid: String,
    size: u64,
}

#[derive(Deserialize)]
struct BatchAnswer {
    #[serde(default)]
    objects: Vec<Answer>,
}

#[derive(Deserialize)]
struct Answer {
    oid: String,
    #[serde(default)]
    actions: Option<Actions>,
    #[serde(default)]
    error: Option<AnswerError>,
}

#[derive(Deserialize, Default)]
struct Actions {
    #[serde(default)]
    download: Option<Action>,
    #[serde(default)]
    upload: Option<Action>,
    #[serde(default)]
    verify: Option<Action>,
}

#[derive(Deserialize)]
struct Action {
    href: String,
    #[serde(default)]
    header: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct AnswerError {
    code: u16,
    message: String,
}

/// The LFS oids and sizes that the pointer blobs of `containers` (ids of
/// live containers of `repo` at `state`, e.g. those a pull added) name.
/// The repository's objects are opened only when those containers hold a
/// blob small enough to be a pointer.
///
/// # Errors
/// The store failed or an object cannot be read.
pub fn pointers_in(
    repo: &Repository,
    state: &RepoState,
    containers: &[String],
) -> Result<BTreeMap<Oid, u64>, gitstow_odb::Error> {
    let mut out = BTreeMap::new();
    let mut db = None;
    let mut cache = ObjectCache::new(1 << 20);
    for id in containers {
        let index = repo.container_index(id)?;
        for e in index.iter() {
            if e.kind != gitstow_odb::record::BLOB || e.size > pointer::MAX_POINTER {
                continue;
            }
            let db = match &mut db {
                Some(db) => db,
                None => db.insert(repo.live_objects(state)?),
            };
            if let Some(obj) = db.read(&e.oid, &mut cache)? {
                if let Some((oid, size)) = pointer::parse(&obj.data) {
                    out.insert(oid, size);
                }
            }
        }
    }
    Ok(out)
}

/// The objects `repo` owns (its claims), oid → size.
///
/// # Errors
/// The store failed.
pub fn owned(
    store: &dyn ObjectStore,
    repo: &str,
) -> Result<BTreeMap<Oid, u64>, gitstow_store::Error> {
    let prefix = gitstow_lfs::keys::owned_prefix(repo);
    let mut out = BTreeMap::new();
    for key in store.list(&prefix)? {
        let Some(oid) = key.strip_prefix(&prefix).and_then(Oid::parse) else {
            continue;
        };
        if let Some(size) = objects::owned_size(store, repo, &oid)? {
            out.insert(oid, size);
        }
    }
    Ok(out)
}

/// Brings `wanted` (oid → size) from `upstream`'s LFS into the store for
/// `repo`, skipping what `repo` owns already; objects over `max_size`
/// bytes are refused. Spools in `staging` (the system's temp directory
/// when `None`).
///
/// # Errors
/// The store failed (what moved before stays). Anything the upstream does
/// is per object, in [`LfsCopied::missing`].
pub fn download(
    store: &dyn ObjectStore,
    repo: &str,
    upstream: &Upstream,
    wanted: &BTreeMap<Oid, u64>,
    max_size: u64,
    staging: Option<&Path>,
) -> Result<LfsCopied, gitstow_store::Error> {
    let mut done = LfsCopied::default();
    let mut todo = Vec::new();
    for (oid, size) in wanted {
        if objects::owned_size(store, repo, oid)? == Some(*size) {
            continue;
        }
        if *size > max_size {
            done.missing.push(Missing::new(
                oid,
                *size,
                format!("{size} bytes is over the limit of {max_size}"),
            ));
            continue;
        }
        todo.push((*oid, *size));
    }
    for_each_answer(
        upstream,
        "download",
        &todo,
        &mut done,
        |oid, size, actions| match actions.download {
            None => Ok(Err("the upstream gave no download action".to_owned())),
            Some(action) => {
                Ok(fetch_one(store, repo, upstream, &action, oid, size, staging)?.map(|()| true))
            }
        },
    )?;
    Ok(done)
}

/// Hands `owned` (oid → size, what the repository owns) on to `remote`'s
/// LFS: the remote's batch answer says which it lacks; those are read from
/// the store and uploaded, then verified when the remote asks.
///
/// # Errors
/// The store failed. Anything the remote does is per object, in
/// [`LfsCopied::missing`].
pub fn upload(
    store: &dyn ObjectStore,
    remote: &Upstream,
    owned: &BTreeMap<Oid, u64>,
    staging: Option<&Path>,
) -> Result<LfsCopied, gitstow_store::Error> {
    let mut done = LfsCopied::default();
    let all: Vec<(Oid, u64)> = owned.iter().map(|(o, s)| (*o, *s)).collect();
    for_each_answer(remote, "upload", &all, &mut done, |oid, size, actions| {
        match actions {
            // No upload action: the remote has it.
            Actions { upload: None, .. } => Ok(Ok(false)),
            Actions {
                upload: Some(put),
                verify,
                ..
            } => Ok(
                send_one(store, remote, &put, verify.as_ref(), oid, size, staging)?.map(|()| true),
            ),
        }
    })?;
    Ok(done)
}

/// Asks `other`'s batch API about `objects` for `operation`,
/// [`BATCH_OBJECTS`] at a time, and hands each object's actions to
/// `transfer`: it moved the object (`Ok(true)`, counted in `done`), had
/// nothing to move (`Ok(false)`), or says why not (listed in
/// `done.missing`, as is an object the answer refuses or leaves out).
///
/// # Errors
/// The store failed (`transfer`'s error).
fn for_each_answer(
    other: &Upstream,
    operation: &str,
    objects: &[(Oid, u64)],
    done: &mut LfsCopied,
    mut transfer: impl FnMut(&Oid, u64, Actions) -> Result<Result<bool, String>, gitstow_store::Error>,
) -> Result<(), gitstow_store::Error> {
    for chunk in objects.chunks(BATCH_OBJECTS) {
        let answers = match batch(other, operation, chunk) {
            Ok(a) => a,
            Err(e) => {
                done.missing
                    .extend(chunk.iter().map(|(oid, size)| Missing::new(oid, *size, &e)));
                continue;
            }
        };
        for (oid, size) in chunk {
            let moved = match answer_for(&answers, oid) {
                Err(why) => Err(why),
                Ok(actions) => transfer(oid, *size, actions)?,
            };
            match moved {
                Ok(true) => {
                    done.copied += 1;
                    done.bytes += size;
                }
                Ok(false) => {}
                Err(why) => done.missing.push(Missing::new(oid, *size, why)),
            }
        }
    }
    Ok(())
}

/// One batch request; the answers by oid.
fn batch(
    other: &Upstream,
    operation: &str,
    objects: &[(Oid, u64)],
) -> Result<BTreeMap<String, Answer>, String> {
    let request = BatchRequest {
        operation,
        transfers: ["basic"],
        objects: objects
            .iter()
            .map(|(oid, size)| Spec {
                oid: oid.to_string(),
                size: *size,
            })
            .collect(),
        hash_algo: "sha256",
    };
    let body = serde_json::to_vec(&request).expect("a batch request encodes");
    let endpoint = endpoint(other, operation)?;
    let url = format!("{}/objects/batch", endpoint.href.trim_end_matches('/'));
    let mut post = other.agent().post(&url);
    for (k, v) in &endpoint.header {
        post = post.header(k.as_str(), v.as_str());
    }
    let response = other
        .authorize(post)
        .header("Accept", MEDIA_TYPE)
        .header("Content-Type", MEDIA_TYPE)
        .send(&body[..])
        .map_err(|e| UpstreamError::Connect(e.to_string()).to_string())?;
    let status = response.status().as_u16();
    if status != 200 {
        return Err(format!("the LFS batch API answered HTTP {status}"));
    }
    let mut bytes = Vec::new();
    response
        .into_body()
        .into_reader()
        .take(MAX_ANSWER_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("reading the LFS batch answer: {e}"))?;
    let answer: BatchAnswer = serde_json::from_slice(&bytes)
        .map_err(|e| format!("the LFS batch answer does not parse: {e}"))?;
    Ok(answer
        .objects
        .into_iter()
        .map(|a| (a.oid.clone(), a))
        .collect())
}

/// Where the other server's LFS API is, and the headers it wants.
#[derive(Deserialize)]
struct Endpoint {
    href: String,
    #[serde(default)]
    header: BTreeMap<String, String>,
}

/// The LFS endpoint for `operation`: git-lfs's default for an HTTP(S)
/// URL; what `git-lfs-authenticate` says for an SSH one (git-lfs
/// `docs/api/server-discovery.md`).
fn endpoint(other: &Upstream, operation: &str) -> Result<Endpoint, String> {
    match other.lfs_authenticate(operation) {
        None => Ok(Endpoint {
            href: lfs_url(other.url()),
            header: BTreeMap::new(),
        }),
        Some(Err(e)) => Err(format!("git-lfs-authenticate: {e}")),
        Some(Ok(json)) => {
            let e: Endpoint = serde_json::from_slice(&json)
                .map_err(|e| format!("git-lfs-authenticate's answer does not parse: {e}"))?;
            if !e.href.starts_with("https://") && !e.href.starts_with("http://") {
                return Err("git-lfs-authenticate gave no http(s) href".into());
            }
            Ok(e)
        }
    }
}

/// The actions of `oid` in `answers`, or why there are none.
fn answer_for(answers: &BTreeMap<String, Answer>, oid: &Oid) -> Result<Actions, String> {
    let Some(a) = answers.get(&oid.to_string()) else {
        return Err("the batch answer leaves it out".into());
    };
    if let Some(e) = &a.error {
        return Err(format!("{} ({})", e.message, e.code));
    }
    Ok(match &a.actions {
        None => Actions::default(),
        Some(x) => Actions {
            download: x.download.as_ref().map(clone_action),
            upload: x.upload.as_ref().map(clone_action),
            verify: x.verify.as_ref().map(clone_action),
        },
    })
}

fn clone_action(a: &Action) -> Action {
    Action {
        href: a.href.clone(),
        header: a.header.clone(),
    }
}

/// A request to an action's `href` with its headers; the other server's
/// credentials too when the action brings no `Authorization` of its own
/// and goes to the same origin (as git-lfs sends them).
fn action_request<B>(
    other: &Upstream,
    request: ureq::RequestBuilder<B>,
    action: &Action,
) -> ureq::RequestBuilder<B> {
    let mut request = request;
    for (k, v) in &action.header {
        request = request.header(k.as_str(), v.as_str());
    }
    let brings_its_own = action
        .header
        .keys()
        .any(|k| k.eq_ignore_ascii_case("authorization"));
    if !brings_its_own && origin(&action.href) == origin(other.url()) {
        request = other.authorize(request);
    }
    request
}

/// `scheme://authority` of `url`.
fn origin(url: &str) -> &str {
    let after = url.find("://").map_or(0, |i| i + 3);
    let end = url[after..].find('/').map_or(url.len(), |i| after + i);
    &url[..end]
}

/// Downloads one object through `action` into the store for `repo`: the
/// store's error, or (per object) why not.
fn fetch_one(
    store: &dyn ObjectStore,
    repo: &str,
    other: &Upstream,
    action: &Action,
    oid: &Oid,
    size: u64,
    staging: Option<&Path>,
) -> Result<Result<(), String>, gitstow_store::Error> {
    if !action.href.starts_with("https://") && !action.href.starts_with("http://") {
        return Ok(Err("the download action is not an http(s) URL".into()));
    }
    let response = match action_request(other, other.agent().get(&action.href), action).call() {
        Ok(r) => r,
        Err(e) => return Ok(Err(format!("the download failed: {e}"))),
    };
    let status = response.status().as_u16();
    if status != 200 {
        return Ok(Err(format!("the download answered HTTP {status}")));
    }
    let spool = match staging {
        Some(dir) => tempfile::NamedTempFile::new_in(dir),
        None => tempfile::NamedTempFile::new(),
    }
    .map_err(|e| io_failed(e, "spooling an LFS object"))?;
    let mut writer = objects::Hashing::new(std::io::BufWriter::new(spool.as_file()));
    // One byte beyond the size tells a longer answer from a whole one.
    let copied = std::io::copy(
        &mut response.into_body().into_reader().take(size + 1),
        &mut writer,
    );
    let (mut buffered, hashed) = writer.finish();
    if let Err(e) = copied.and_then(|_| buffered.flush()) {
        return Ok(Err(format!("the download broke off: {e}")));
    }
    drop(buffered);
    match objects::accept(store, repo, oid, size, hashed, spool.path()) {
        Ok(()) => Ok(Ok(())),
        Err(objects::ObjectError::Store(e)) => Err(e),
        Err(e) => Ok(Err(e.to_string())),
    }
}

/// Uploads one object the store holds through `put`, then `verify`: the
/// store's error, or (per object) why not.
fn send_one(
    store: &dyn ObjectStore,
    other: &Upstream,
    put: &Action,
    verify: Option<&Action>,
    oid: &Oid,
    size: u64,
    staging: Option<&Path>,
) -> Result<Result<(), String>, gitstow_store::Error> {
    for a in std::iter::once(put).chain(verify) {
        if !a.href.starts_with("https://") && !a.href.starts_with("http://") {
            return Ok(Err("an upload action is not an http(s) URL".into()));
        }
    }
    let mut spool = match staging {
        Some(dir) => tempfile::tempfile_in(dir),
        None => tempfile::tempfile(),
    }
    .map_err(|e| io_failed(e, "spooling an LFS object"))?;
    let mut at = 0;
    while at < size {
        let end = size.min(at + (8 << 20));
        let chunk = objects::read(store, oid, at..end)?;
        spool
            .write_all(&chunk)
            .map_err(|e| io_failed(e, "spooling an LFS object"))?;
        at = end;
    }
    spool
        .rewind()
        .map_err(|e| io_failed(e, "spooling an LFS object"))?;
    let sent = action_request(other, other.agent().put(&put.href), put)
        .header("Content-Type", "application/octet-stream")
        .header("Content-Length", &size.to_string())
        .send(spool);
    match sent {
        Ok(r) if (200..300).contains(&r.status().as_u16()) => {}
        Ok(r) => {
            return Ok(Err(format!(
                "the upload answered HTTP {}",
                r.status().as_u16()
            )))
        }
        Err(e) => return Ok(Err(format!("the upload failed: {e}"))),
    }
    let Some(verify) = verify else {
        return Ok(Ok(()));
    };
    let body = serde_json::to_vec(&Spec {
        oid: oid.to_string(),
        size,
    })
    .expect("a verify request encodes");
    let verified = action_request(other, other.agent().post(&verify.href), verify)
        .header("Accept", MEDIA_TYPE)
        .header("Content-Type", MEDIA_TYPE)
        .send(&body[..]);
    Ok(match verified {
        Ok(r) if (200..300).contains(&r.status().as_u16()) => Ok(()),
        Ok(r) => Err(format!("the verify answered HTTP {}", r.status().as_u16())),
        Err(e) => Err(format!("the verify failed: {e}")),
    })
}

fn io_failed(e: std::io::Error, what: &str) -> gitstow_store::Error {
    gitstow_store::Error::Io {
        key: what.to_owned(),
        source: e,
    }
}

/// git-lfs's default LFS endpoint of a repository URL.
pub fn lfs_url(url: &str) -> String {
    let url = url.trim_end_matches('/');
    if url.ends_with(".git") {
        format!("{url}/info/lfs")
    } else {
        format!("{url}.git/info/lfs")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_and_origin_are_git_lfs_s() {
        assert_eq!(
            lfs_url("https://h/org/app.git"),
            "https://h/org/app.git/info/lfs"
        );
        assert_eq!(
            lfs_url("https://h/org/app/"),
            "https://h/org/app.git/info/lfs"
        );
        assert_eq!(origin("https://h:8080/a/b"), "https://h:8080");
        assert_eq!(origin("http://h"), "http://h");
        assert_ne!(origin("https://h.evil/x"), origin("https://h/x"));
    }
}

//! The repository state object: the refs (ref tables and an inline part,
//! [`RefSet`]), the symbolic HEAD and the list of live containers. Stored
//! zstd-compressed JSON at `<repo>.git/state`; a conditional PUT of it is the
//! commit point of a push.
//!
//! Two formats: 1 holds every ref inline (`refs`, `peeled`); 2 adds the
//! stack of ref tables (`ref_tables`), deletion records of the inline part
//! (`deleted_refs`) and the live ref count (`ref_count`). A state without
//! ref tables is written in format 1, so that builds that read only format
//! 1 keep serving repositories whose refs all fit inline. A SHA-256
//! repository's state is format 3: format 2 with `object_format`
//! (`"sha256"`), so that a build that knows only SHA-1 refuses it by
//! number instead of ignoring a field it does not know (plan 0019). A SHA-1
//! state never carries the field.

use std::collections::BTreeMap;

use gix_hash::ObjectId;
use serde::{Deserialize, Serialize};

use crate::reftable::RefValue;

/// Newest format version of a SHA-1 state this build writes (only for
/// states with ref tables; others are written as format 1).
pub const FORMAT: u32 = 2;

/// The format of every SHA-256 state (format 2 with `object_format`).
pub const FORMAT_SHA256: u32 = 3;

/// Bytes of inline refs (names and values, estimated as [`RefSet::recent_bytes`]
/// counts them) past which a commit first writes them out as a ref table.
pub const MAX_RECENT_BYTES: usize = 64 << 10;

/// An immutable ref table as the state lists it (`<repo>.git/refs/<id>.ref`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefTableRef {
    /// Hex SHA-256 naming the table (salted: no two writers share one).
    pub id: String,
    /// Records in it, deletions included.
    pub records: u64,
    /// Size in bytes.
    pub bytes: u64,
}

/// The refs of a state: a stack of immutable ref tables in the store,
/// oldest first, and the updates since the newest table, inline. A ref's
/// value is the inline record for its name if there is one, else the
/// newest table's that has one; a deletion record ends the search. Read it
/// through [`crate::refs::Refs`] ([`crate::Repository::refs`]), which opens
/// the tables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefSet {
    /// Ref tables, oldest first.
    pub tables: Vec<RefTableRef>,
    /// Inline records sorted by name, each name once. A
    /// [`RefValue::Deleted`] record appears only above tables.
    pub recent: Vec<(String, RefValue)>,
    /// Live refs in all (tables and inline), kept by every writer.
    pub count: u64,
}

impl RefSet {
    /// The inline record of `name`, if any (a deletion record included).
    pub fn recent_get(&self, name: &str) -> Option<RefValue> {
        self.recent
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| self.recent[i].1)
    }

    /// Records `value` for `name` (a deletion for [`RefValue::Deleted`]);
    /// `existed` says whether the ref exists before the update (the caller
    /// looked it up), which keeps [`RefSet::count`]. Without tables a
    /// deletion removes the inline record instead of adding one.
    pub fn update(&mut self, name: &str, value: RefValue, existed: bool) {
        let found = self.recent.binary_search_by(|(n, _)| n.as_str().cmp(name));
        let tombstone_not_needed = value.is_deletion() && self.tables.is_empty();
        match found {
            Ok(i) if tombstone_not_needed => {
                self.recent.remove(i);
            }
            Ok(i) => self.recent[i].1 = value,
            Err(_) if tombstone_not_needed => {}
            Err(i) => self.recent.insert(i, (name.to_owned(), value)),
        }
        match (existed, value.is_deletion()) {
            (true, true) => self.count = self.count.saturating_sub(1),
            (false, false) => self.count += 1,
            _ => {}
        }
    }

    /// Points `name` at `oid` in a set without tables (a test's or a new
    /// repository's refs): whether it existed is read from the inline part.
    pub fn insert(&mut self, name: impl AsRef<str>, oid: ObjectId) {
        let name = name.as_ref();
        let existed = self.recent_get(name).is_some_and(|v| !v.is_deletion());
        self.update(name, RefValue::Oid(oid), existed);
    }

    /// Estimated encoded bytes of the inline part: each record's name, its
    /// hex oids and the JSON around them.
    pub fn recent_bytes(&self) -> usize {
        self.recent
            .iter()
            .map(|(n, v)| {
                n.len()
                    + 8
                    + match v {
                        RefValue::Deleted => 0,
                        RefValue::Oid(_) => 42,
                        RefValue::Peeled { .. } => 96 + n.len(),
                    }
            })
            .sum()
    }

    /// True when the inline part has passed [`MAX_RECENT_BYTES`]: the next
    /// commit writes it out as a ref table first.
    pub fn outgrown(&self) -> bool {
        self.recent_bytes() > MAX_RECENT_BYTES
    }

    /// Live refs in all ([`RefSet::count`]).
    pub fn len(&self) -> u64 {
        self.count
    }

    /// True when the repository has no refs.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// A live container as the state lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerRef {
    /// Its id, in hex: unique to the writer that sealed it (a SHA-256 of a
    /// writer-unique token and the container's index; plan 0004), naming
    /// its `.bin` and `.idx`.
    pub id: String,
    /// Objects in it.
    pub objects: u64,
    /// Size of the `.bin` in bytes.
    pub bytes: u64,
}

/// A container of objects no ref reached when a GC ran, held for the grace
/// period. Lookups still find its objects (after every live container); a
/// push that relies on one of them moves the container back to the live list
/// in its own commit. Once `since` + the grace period has passed, maintenance
/// retires it ([`crate::retired`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GarbageContainer {
    /// The container's id.
    pub id: String,
    /// Objects in it.
    pub objects: u64,
    /// Size of the `.bin` in bytes.
    pub bytes: u64,
    /// When the GC wrote it, in seconds since the Unix epoch.
    pub since: u64,
}

impl GarbageContainer {
    /// The container as a live entry.
    pub fn to_live(&self) -> ContainerRef {
        ContainerRef {
            id: self.id.clone(),
            objects: self.objects,
            bytes: self.bytes,
        }
    }
}

/// Containers that hold exactly the objects some commits and tags reach,
/// each once: what a GC leaves (its live output and the refs it walked). While
/// every one of them stays live, a clone whose wants reach every tip walks
/// only the history outside (from its wants down to the tips, as an
/// incremental fetch would) and is sent these containers whole: the role of
/// git's reachability bitmaps, for one set of commits. A push into an empty
/// repository that leaves it closed records one too (its containers and
/// the refs it created). Pushes keep it; a merge or a GC that replaces one
/// of the containers drops or renews it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closure {
    /// The objects the refs named when the GC ran that no other of them
    /// reaches (a commit that is no other tip's ancestor, a tag no other tag
    /// names), distinct; for a push's closure, every object its refs named
    /// (some may reach others: a clone then uses the closure only when its
    /// wants reach each of them, which is always safe).
    pub tips: Vec<ObjectId>,
    /// Ids of the containers, in the state's order.
    pub containers: Vec<String>,
    /// Whether reachability bitmaps were written for it (a GC's closure);
    /// the closure a push into an empty repository records has none.
    pub bitmaps: bool,
}

fn yes() -> bool {
    true
}

fn is_yes(b: &bool) -> bool {
    *b
}

#[derive(Serialize, Deserialize)]
struct ClosureFile {
    tips: Vec<String>,
    containers: Vec<String>,
    /// Absent (true) in states written before push-made closures.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    bitmaps: bool,
}

/// What a repository is, as of one version of its state object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepoState {
    /// The ref HEAD points at (e.g. `refs/heads/main`); it may not exist yet (unborn).
    pub head: Option<String>,
    /// The refs: ref tables and the inline part (annotated tags carry the
    /// first non-tag object their chain reaches).
    pub refs: RefSet,
    /// Live containers, oldest first. A delta's base is always in the same or an earlier container.
    pub containers: Vec<ContainerRef>,
    /// Every object of the live containers is reachable from the refs: true
    /// while the repository has only ever gained refs by pushes that created
    /// them (no update, no deletion, no rejected command). A fetch that wants
    /// every ref tip and has nothing is then answered with every object,
    /// without a reachability walk. `false` is always safe.
    pub closed: bool,
    /// Containers of unreachable objects held for the grace period (see
    /// [`GarbageContainer`]).
    pub garbage: Vec<GarbageContainer>,
    /// What the last GC left, if it still holds (see [`Closure`]); `None` is
    /// always safe.
    pub closure: Option<Closure>,
    /// The repository was deleted (`gitstow repo delete`): it has no refs
    /// and no containers, serves as not found, and a push re-creates it.
    /// Maintenance removes the state once the deleted containers are gone.
    pub deleted: bool,
    /// Ids of containers whose files maintenance is deleting now: listed by
    /// compare-and-swap before the first file is deleted, dropped after the
    /// last. A commit never names one of them (see [`RepoState::deletions`]).
    pub deleting: Vec<String>,
    /// How many deletions maintenance has started on this repository, ever
    /// (each adds its ids to [`RepoState::deleting`] and counts one). A
    /// writer that read the state with this count before it uploaded a
    /// container, and reads the same count at its commit, knows no deletion
    /// started in between, so its upload is intact; otherwise it checks its
    /// containers are still in the store ([`crate::Repository::uploads_intact`]).
    pub deletions: u64,
    /// Which life of the repository this is: a new number each time a push
    /// creates it, from nothing or from a deletion. A writer that read one
    /// incarnation and finds another (or a deletion) at its commit would
    /// name objects of a repository that is gone, and refuses. 0 in states
    /// written before it was kept.
    pub incarnation: u64,
    /// The repository's object format (`object-format` in
    /// `gitprotocol-capabilities(5)`): fixed when it is created; every oid
    /// it stores or names has its width.
    pub object_format: gix_hash::Kind,
}

#[derive(Serialize, Deserialize)]
struct StateFile {
    format: u32,
    /// Format 3: `"sha256"`. Absent in formats 1 and 2 (SHA-1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    object_format: Option<String>,
    head: Option<String>,
    refs: BTreeMap<String, String>,
    #[serde(default)]
    peeled: BTreeMap<String, String>,
    /// Format 2: names the inline part deletes from the tables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    deleted_refs: Vec<String>,
    /// Format 2: the ref tables, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    ref_tables: Vec<RefTableRef>,
    /// Format 2: live refs in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ref_count: Option<u64>,
    containers: Vec<ContainerRef>,
    /// Absent in states written before the flag existed: not closed.
    #[serde(default)]
    closed: bool,
    /// Absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    garbage: Vec<GarbageContainer>,
    /// Absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    closure: Option<ClosureFile>,
    /// Absent unless the repository was deleted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    deleted: bool,
    /// Absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    deleting: Vec<String>,
    /// Absent when zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    deletions: u64,
    /// Absent when zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    incarnation: u64,
}

/// A new [`RepoState::incarnation`]: never 0, and different from any
/// other a process makes (the time in nanoseconds, the process id and a
/// counter, mixed).
pub fn new_incarnation() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut x = nanos
        ^ (u64::from(std::process::id()) << 40)
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    // splitmix64's finalizer
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (x ^ (x >> 31)).max(1)
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A state object that could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Not zstd, or not the expected JSON.
    #[error("repository state is unreadable: {0}")]
    Malformed(String),
    /// A format version this build does not know.
    #[error("repository state has format {0}, this build reads formats 1 to {FORMAT_SHA256}")]
    UnknownFormat(u32),
}

/// zstd-compressed JSON of `value`: how the state and the retired list are stored.
pub(crate) fn encode_json<T: Serialize>(value: &T) -> Vec<u8> {
    let json = serde_json::to_vec(value).expect("in-memory values serialize");
    zstd::bulk::compress(&json, 3).expect("zstd compression of an in-memory buffer")
}

/// Largest decompressed state read in one allocation of the size its frame
/// declares; a larger declaration is streamed instead (the declaration is
/// not trusted with an allocation beyond this).
const MAX_BULK_STATE_BYTES: u64 = 64 << 20;

/// Decodes what [`encode_json`] wrote.
pub(crate) fn decode_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, StateError> {
    let json = crate::zstd_frame::decompress(bytes, MAX_BULK_STATE_BYTES, u64::MAX)
        .map_err(|e| StateError::Malformed(e.to_string()))?;
    serde_json::from_slice(&json).map_err(|e| StateError::Malformed(e.to_string()))
}

/// `hex` as an oid of `kind`: a hex id of the other width is malformed.
fn parse_oid(hex: &str, kind: gix_hash::Kind) -> Result<ObjectId, StateError> {
    let oid = ObjectId::from_hex(hex.as_bytes())
        .map_err(|e| StateError::Malformed(format!("bad oid {hex:?}: {e}")))?;
    if oid.kind() != kind {
        return Err(StateError::Malformed(format!(
            "oid {hex:?} is not {kind}, the repository's object format"
        )));
    }
    Ok(oid)
}

impl RepoState {
    /// Serializes to zstd-compressed JSON.
    pub fn encode(&self) -> Vec<u8> {
        let with_tables = !self.refs.tables.is_empty();
        let mut refs = BTreeMap::new();
        let mut peeled = BTreeMap::new();
        let mut deleted_refs = Vec::new();
        for (name, value) in &self.refs.recent {
            match value {
                RefValue::Deleted => deleted_refs.push(name.clone()),
                RefValue::Oid(oid) => {
                    refs.insert(name.clone(), oid.to_string());
                }
                RefValue::Peeled { oid, peeled: p } => {
                    refs.insert(name.clone(), oid.to_string());
                    peeled.insert(name.clone(), p.to_string());
                }
            }
        }
        let sha1 = self.object_format == gix_hash::Kind::Sha1;
        let file = StateFile {
            format: match (sha1, with_tables) {
                (false, _) => FORMAT_SHA256,
                (true, true) => FORMAT,
                (true, false) => 1,
            },
            object_format: (!sha1).then(|| self.object_format.to_string()),
            head: self.head.clone(),
            refs,
            peeled,
            deleted_refs,
            ref_tables: self.refs.tables.clone(),
            ref_count: with_tables.then_some(self.refs.count),
            containers: self.containers.clone(),
            closed: self.closed,
            garbage: self.garbage.clone(),
            closure: self.closure.as_ref().map(|c| ClosureFile {
                tips: c.tips.iter().map(ObjectId::to_string).collect(),
                containers: c.containers.clone(),
                bitmaps: c.bitmaps,
            }),
            deleted: self.deleted,
            deleting: self.deleting.clone(),
            deletions: self.deletions,
            incarnation: self.incarnation,
        };
        encode_json(&file)
    }

    /// An estimate of the bytes the decoded state holds in memory (refs and
    /// peeled entries with their map nodes, containers), for cache budgets.
    pub fn approximate_bytes(&self) -> usize {
        const PER_ENTRY: usize = 24 + 44; // String header, value
        let refs: usize = self
            .refs
            .recent
            .iter()
            .map(|(k, _)| k.len() + PER_ENTRY)
            .sum();
        let tables = self.refs.tables.len() * 128;
        let containers = (self.containers.len() + self.garbage.len()) * 128;
        let closure = self.closure.as_ref().map_or(0, |c| {
            c.tips.len() * 20 + c.containers.iter().map(|s| s.len() + 24).sum::<usize>()
        });
        std::mem::size_of::<Self>() + refs + tables + containers + closure
    }

    /// Decodes what [`RepoState::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Result<Self, StateError> {
        let file: StateFile = decode_json(bytes)?;
        let kind = match (file.format, file.object_format.as_deref()) {
            (1..=FORMAT, None) => gix_hash::Kind::Sha1,
            (1..=FORMAT, Some(_)) => {
                return Err(StateError::Malformed(format!(
                    "format {} names an object format",
                    file.format
                )))
            }
            (FORMAT_SHA256, Some("sha256")) => gix_hash::Kind::Sha256,
            (FORMAT_SHA256, other) => {
                return Err(StateError::Malformed(format!(
                    "format {FORMAT_SHA256} with object format {other:?}"
                )))
            }
            (n, _) => return Err(StateError::UnknownFormat(n)),
        };
        let live = file.refs.len() as u64;
        let mut recent: BTreeMap<String, RefValue> = BTreeMap::new();
        for (name, hex) in file.refs {
            let oid = parse_oid(&hex, kind)?;
            let value = match file.peeled.get(&name) {
                Some(p) => RefValue::Peeled {
                    oid,
                    peeled: parse_oid(p, kind)?,
                },
                None => RefValue::Oid(oid),
            };
            recent.insert(name, value);
        }
        if file.ref_tables.is_empty() && !file.deleted_refs.is_empty() {
            return Err(StateError::Malformed(
                "ref deletions without ref tables".into(),
            ));
        }
        for name in file.deleted_refs {
            if recent.insert(name, RefValue::Deleted).is_some() {
                return Err(StateError::Malformed("a ref both deleted and set".into()));
            }
        }
        let count = match (file.ref_tables.is_empty(), file.ref_count) {
            (true, _) => live,
            (false, Some(n)) => n,
            (false, None) => {
                return Err(StateError::Malformed(
                    "ref tables without a ref count".into(),
                ))
            }
        };
        Ok(RepoState {
            head: file.head,
            refs: RefSet {
                tables: file.ref_tables,
                recent: recent.into_iter().collect(),
                count,
            },
            containers: file.containers,
            closed: file.closed,
            garbage: file.garbage,
            closure: file
                .closure
                .map(|c| {
                    Ok::<_, StateError>(Closure {
                        tips: c
                            .tips
                            .iter()
                            .map(|t| parse_oid(t, kind))
                            .collect::<Result<_, _>>()?,
                        containers: c.containers,
                        bitmaps: c.bitmaps,
                    })
                })
                .transpose()?,
            deleted: file.deleted,
            deleting: file.deleting,
            deletions: file.deletions,
            incarnation: file.incarnation,
            object_format: kind,
        })
    }

    /// The closure and the positions of its containers in
    /// [`RepoState::containers`], when every one of them is still live.
    pub fn live_closure(&self) -> Option<(&Closure, Vec<usize>)> {
        let c = self.closure.as_ref()?;
        let positions = c
            .containers
            .iter()
            .map(|id| self.containers.iter().position(|l| &l.id == id))
            .collect::<Option<Vec<usize>>>()?;
        (!positions.is_empty() && !c.tips.is_empty()).then_some((c, positions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let mut s = RepoState {
            head: Some("refs/heads/main".into()),
            ..Default::default()
        };
        let oid = ObjectId::from_bytes_or_panic(&[3; 20]);
        s.refs.insert("refs/heads/main", oid);
        s.refs
            .update("refs/tags/v1", RefValue::Peeled { oid, peeled: oid }, false);
        s.containers.push(ContainerRef {
            id: "ab".into(),
            objects: 3,
            bytes: 99,
        });
        assert_eq!(RepoState::decode(&s.encode()).unwrap(), s);
        s.closed = true;
        assert_eq!(RepoState::decode(&s.encode()).unwrap(), s);
        s.garbage.push(GarbageContainer {
            id: "ef".into(),
            objects: 2,
            bytes: 10,
            since: 1_700_000_001,
        });
        assert_eq!(RepoState::decode(&s.encode()).unwrap(), s);
        assert!(s.live_closure().is_none());
        s.closure = Some(Closure {
            tips: vec![oid],
            containers: vec!["ab".into()],
            bitmaps: false,
        });
        assert_eq!(RepoState::decode(&s.encode()).unwrap(), s);
        s.closure.as_mut().unwrap().bitmaps = true;
        assert_eq!(RepoState::decode(&s.encode()).unwrap(), s);
        assert_eq!(s.live_closure().unwrap().1, vec![0]);
        s.deleting.push("cd".into());
        s.deletions = 3;
        s.incarnation = 0x1234_5678_9abc;
        assert_eq!(RepoState::decode(&s.encode()).unwrap(), s);
        s.closure.as_mut().unwrap().containers.push("gone".into());
        assert!(s.live_closure().is_none());
        // A state written before `closed` existed reads as not closed.
        let old = br#"{"format":1,"head":null,"refs":{},"containers":[]}"#;
        let old = zstd::bulk::compress(old, 3).unwrap();
        assert!(!RepoState::decode(&old).unwrap().closed);
        assert!(RepoState::decode(b"junk").is_err());
    }

    #[test]
    fn format_2_only_with_tables() {
        let oid = ObjectId::from_bytes_or_panic(&[3; 20]);
        let mut s = RepoState::default();
        s.refs.insert("refs/heads/a", oid);
        s.refs.insert("refs/heads/b", oid);
        let file: StateFile = decode_json(&s.encode()).unwrap();
        assert_eq!(file.format, 1);
        s.refs.tables.push(RefTableRef {
            id: "t1".into(),
            records: 5,
            bytes: 300,
        });
        s.refs.update("refs/heads/a", RefValue::Deleted, true);
        s.refs.update("refs/heads/old", RefValue::Deleted, true);
        assert_eq!(s.refs.count, 0);
        let bytes = s.encode();
        let file: StateFile = decode_json(&bytes).unwrap();
        assert_eq!(file.format, 2);
        assert_eq!(file.deleted_refs, ["refs/heads/a", "refs/heads/old"]);
        assert_eq!(RepoState::decode(&bytes).unwrap(), s);
        // Without tables a deletion leaves no record.
        let mut inline = RepoState::default();
        inline.refs.insert("refs/heads/a", oid);
        inline.refs.update("refs/heads/a", RefValue::Deleted, true);
        assert!(inline.refs.recent.is_empty());
        assert_eq!(inline.refs.count, 0);
        // A format this build does not know is refused by number.
        let future = br#"{"format":4,"head":null,"refs":{},"containers":[]}"#;
        let future = zstd::bulk::compress(future, 3).unwrap();
        assert!(matches!(
            RepoState::decode(&future),
            Err(StateError::UnknownFormat(4))
        ));
    }

    #[test]
    fn a_sha256_state_is_format_3_and_names_its_object_format() {
        let oid = ObjectId::from_bytes_or_panic(&[3; 32]);
        let peeled = ObjectId::from_bytes_or_panic(&[4; 32]);
        let mut s = RepoState {
            object_format: gix_hash::Kind::Sha256,
            head: Some("refs/heads/main".into()),
            ..RepoState::default()
        };
        s.refs.insert("refs/heads/main", oid);
        s.refs
            .update("refs/tags/v1", RefValue::Peeled { oid, peeled }, false);
        s.closure = Some(Closure {
            tips: vec![oid],
            containers: vec!["ab".into()],
            bitmaps: true,
        });
        let bytes = s.encode();
        let file: StateFile = decode_json(&bytes).unwrap();
        assert_eq!(file.format, FORMAT_SHA256);
        assert_eq!(file.object_format.as_deref(), Some("sha256"));
        assert_eq!(file.refs["refs/heads/main"], oid.to_string());
        assert_eq!(file.refs["refs/heads/main"].len(), 64);
        assert_eq!(RepoState::decode(&bytes).unwrap(), s);
        // A SHA-1 state never names its format, so that builds from before
        // SHA-256 read it as they always did.
        let mut one = RepoState::default();
        one.refs
            .insert("refs/heads/main", ObjectId::from_bytes_or_panic(&[3; 20]));
        let file: StateFile = decode_json(&one.encode()).unwrap();
        assert_eq!((file.format, file.object_format), (1, None));
        assert_eq!(
            RepoState::decode(&one.encode()).unwrap().object_format,
            gix_hash::Kind::Sha1
        );
    }

    #[test]
    fn a_state_whose_oids_or_format_disagree_is_malformed() {
        let sha1 = "0123456789abcdef0123456789abcdef01234567";
        let sha256 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        for json in [
            // A SHA-1 state naming a 64-hex oid, and the reverse.
            format!(
                r#"{{"format":1,"head":null,"refs":{{"refs/heads/a":"{sha256}"}},"containers":[]}}"#
            ),
            format!(
                r#"{{"format":3,"object_format":"sha256","head":null,"refs":{{"refs/heads/a":"{sha1}"}},"containers":[]}}"#
            ),
            // Format 3 without its object format or with another; format 2 with one.
            r#"{"format":3,"head":null,"refs":{},"containers":[]}"#.to_string(),
            r#"{"format":3,"object_format":"sha1","head":null,"refs":{},"containers":[]}"#
                .to_string(),
            r#"{"format":2,"object_format":"sha256","head":null,"refs":{},"containers":[]}"#
                .to_string(),
        ] {
            let bytes = zstd::bulk::compress(json.as_bytes(), 3).unwrap();
            assert!(
                matches!(RepoState::decode(&bytes), Err(StateError::Malformed(_))),
                "{json}"
            );
        }
    }
}

//! The repository state object: every ref, peeled tag targets, the symbolic
//! HEAD and the list of live containers. Stored zstd-compressed JSON at
//! `<repo>.git/state`; a conditional PUT of it is the commit point of a push.

use std::collections::BTreeMap;

use gix_hash::ObjectId;
use serde::{Deserialize, Serialize};

/// Current format version written into every state.
pub const FORMAT: u32 = 1;

/// A live container as the state lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerRef {
    /// Hex SHA-256 of the `.bin`.
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
/// git's reachability bitmaps, for one set of commits. Pushes keep it; a
/// merge or a GC that replaces one of the containers drops or renews it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closure {
    /// The objects the refs named when the GC ran that no other of them
    /// reaches (a commit that is no other tip's ancestor, a tag no other tag
    /// names), distinct.
    pub tips: Vec<ObjectId>,
    /// Ids of the containers, in the state's order.
    pub containers: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct ClosureFile {
    tips: Vec<String>,
    containers: Vec<String>,
}

/// What a repository is, as of one version of its state object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepoState {
    /// The ref HEAD points at (e.g. `refs/heads/main`); it may not exist yet (unborn).
    pub head: Option<String>,
    /// Every ref: full name → oid.
    pub refs: BTreeMap<String, ObjectId>,
    /// For refs pointing at annotated tags: the first non-tag object the tag chain reaches.
    pub peeled: BTreeMap<String, ObjectId>,
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
}

#[derive(Serialize, Deserialize)]
struct StateFile {
    format: u32,
    head: Option<String>,
    refs: BTreeMap<String, String>,
    #[serde(default)]
    peeled: BTreeMap<String, String>,
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
    #[error("repository state has format {0}, this build reads format {FORMAT}")]
    UnknownFormat(u32),
}

/// zstd-compressed JSON of `value`: how the state and the retired list are stored.
pub(crate) fn encode_json<T: Serialize>(value: &T) -> Vec<u8> {
    let json = serde_json::to_vec(value).expect("in-memory values serialize");
    zstd::bulk::compress(&json, 3).expect("zstd compression of an in-memory buffer")
}

/// Decodes what [`encode_json`] wrote.
pub(crate) fn decode_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, StateError> {
    let json = zstd::stream::decode_all(bytes).map_err(|e| StateError::Malformed(e.to_string()))?;
    serde_json::from_slice(&json).map_err(|e| StateError::Malformed(e.to_string()))
}

fn parse_oid(hex: &str) -> Result<ObjectId, StateError> {
    ObjectId::from_hex(hex.as_bytes())
        .map_err(|e| StateError::Malformed(format!("bad oid {hex:?}: {e}")))
}

impl RepoState {
    /// Serializes to zstd-compressed JSON.
    pub fn encode(&self) -> Vec<u8> {
        let file = StateFile {
            format: FORMAT,
            head: self.head.clone(),
            refs: self
                .refs
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
            peeled: self
                .peeled
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
            containers: self.containers.clone(),
            closed: self.closed,
            garbage: self.garbage.clone(),
            closure: self.closure.as_ref().map(|c| ClosureFile {
                tips: c.tips.iter().map(ObjectId::to_string).collect(),
                containers: c.containers.clone(),
            }),
            deleted: self.deleted,
            deleting: self.deleting.clone(),
            deletions: self.deletions,
        };
        encode_json(&file)
    }

    /// An estimate of the bytes the decoded state holds in memory (refs and
    /// peeled entries with their map nodes, containers), for cache budgets.
    pub fn approximate_bytes(&self) -> usize {
        const PER_ENTRY: usize = 24 + 20 + 32; // String header, oid, map node share
        let refs: usize = self.refs.keys().map(|k| k.len() + PER_ENTRY).sum();
        let peeled: usize = self.peeled.keys().map(|k| k.len() + PER_ENTRY).sum();
        let containers = (self.containers.len() + self.garbage.len()) * 128;
        let closure = self.closure.as_ref().map_or(0, |c| {
            c.tips.len() * 20 + c.containers.iter().map(|s| s.len() + 24).sum::<usize>()
        });
        std::mem::size_of::<Self>() + refs + peeled + containers + closure
    }

    /// Decodes what [`RepoState::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Result<Self, StateError> {
        let file: StateFile = decode_json(bytes)?;
        if file.format != FORMAT {
            return Err(StateError::UnknownFormat(file.format));
        }
        Ok(RepoState {
            head: file.head,
            refs: file
                .refs
                .iter()
                .map(|(k, v)| Ok((k.clone(), parse_oid(v)?)))
                .collect::<Result<_, StateError>>()?,
            peeled: file
                .peeled
                .iter()
                .map(|(k, v)| Ok((k.clone(), parse_oid(v)?)))
                .collect::<Result<_, StateError>>()?,
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
                            .map(|t| parse_oid(t))
                            .collect::<Result<_, _>>()?,
                        containers: c.containers,
                    })
                })
                .transpose()?,
            deleted: file.deleted,
            deleting: file.deleting,
            deletions: file.deletions,
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

    /// The oid HEAD resolves to, if its target exists.
    pub fn head_oid(&self) -> Option<ObjectId> {
        self.head.as_ref().and_then(|h| self.refs.get(h)).copied()
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
        s.refs.insert("refs/heads/main".into(), oid);
        s.peeled.insert("refs/tags/v1".into(), oid);
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
        });
        assert_eq!(RepoState::decode(&s.encode()).unwrap(), s);
        assert_eq!(s.live_closure().unwrap().1, vec![0]);
        s.deleting.push("cd".into());
        s.deletions = 3;
        assert_eq!(RepoState::decode(&s.encode()).unwrap(), s);
        s.closure.as_mut().unwrap().containers.push("gone".into());
        assert!(s.live_closure().is_none());
        // A state written before `closed` existed reads as not closed.
        let old = br#"{"format":1,"head":null,"refs":{},"containers":[]}"#;
        let old = zstd::bulk::compress(old, 3).unwrap();
        assert!(!RepoState::decode(&old).unwrap().closed);
        assert_eq!(s.head_oid(), Some(oid));
        assert!(RepoState::decode(b"junk").is_err());
    }
}

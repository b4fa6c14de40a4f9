//! Object checks done while resolving: every object must parse (gix-object),
//! and the objects it names are collected for the connectivity check.

use gix_hash::ObjectId;
use gix_object::{Kind, ObjectRef};

/// What the checks collect from one resolver thread.
#[derive(Debug, Default)]
pub struct Collected {
    /// Every object named by a pushed commit, tree (except gitlinks) or tag.
    pub references: gix_hashtable::HashSet,
    /// (tag oid, target oid) of every pushed annotated tag, for peeling.
    pub tag_targets: Vec<(ObjectId, ObjectId)>,
    /// Every object of the push, in resolution order.
    pub oids: Vec<ObjectId>,
}

/// Parses `data` as an object of `kind`; on success records what it names.
/// The error is the reason reported to the client.
pub fn check_object(
    oid: &ObjectId,
    kind: Kind,
    data: &[u8],
    out: &mut Collected,
) -> Result<(), String> {
    let parsed = ObjectRef::from_bytes(data, kind, gix_hash::Kind::Sha1)
        .map_err(|e| format!("invalid {kind} object {oid}: {e}"))?;
    match parsed {
        ObjectRef::Blob(_) => {}
        ObjectRef::Commit(c) => {
            out.references.insert(c.tree());
            out.references.extend(c.parents());
        }
        ObjectRef::Tree(t) => {
            for e in &t.entries {
                if !e.mode.is_commit() {
                    out.references.insert(e.oid.to_owned());
                }
            }
        }
        ObjectRef::Tag(t) => {
            let target = t.target();
            out.references.insert(target);
            out.tag_targets.push((*oid, target));
        }
    }
    out.oids.push(*oid);
    Ok(())
}

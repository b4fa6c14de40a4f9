//! Commit graphs of the containers maintenance writes ([`gitstow_odb::graph`]).
//!
//! A merged or collected container gets the rows of the commits it stores:
//! taken from the sources' graphs when they have them, read from the
//! commits otherwise, and every generation number computed (down to the
//! root commits if no graph knows them: maintenance is where the unknown
//! generations a push could not fill in are completed).

use gitstow_odb::graph::{CommitRow, GENERATION_UNKNOWN};
use gitstow_odb::{ObjectCache, ObjectDb};
use gix_hash::ObjectId;
use gix_hashtable::HashMap;

use crate::{Error, Result};

/// Rows and generations found so far, shared by the containers of one run.
pub struct GraphRows<'a> {
    db: &'a ObjectDb,
    cache: ObjectCache,
    generations: HashMap<ObjectId, u32>,
}

impl<'a> GraphRows<'a> {
    /// Rows of the commits of `db` (the sources of a maintenance run).
    pub fn new(db: &'a ObjectDb) -> Self {
        GraphRows {
            db,
            cache: ObjectCache::new(16 << 20),
            generations: HashMap::default(),
        }
    }

    /// Commit `oid`'s row, from a graph or read; `None` when `db` lacks it.
    fn row(&mut self, oid: &ObjectId) -> Result<Option<CommitRow>> {
        if let Some(c) = self.db.graph_commit(oid) {
            return Ok(Some(CommitRow {
                oid: *oid,
                tree: c.tree,
                parents: c.parents.to_vec(),
                time: c.time,
                generation: c.generation,
            }));
        }
        let Some(obj) = self.db.read(oid, &mut self.cache)? else {
            return Ok(None);
        };
        if obj.kind != gix_object::Kind::Commit {
            return Ok(None);
        }
        CommitRow::parse(*oid, &obj.data).map(Some).ok_or_else(|| {
            Error::Odb(gitstow_odb::Error::CorruptObject {
                oid: *oid,
                reason: "commit does not parse".into(),
            })
        })
    }

    /// The rows of `commits`, every generation computed (unknown only past
    /// a parent the repository lacks, as in a shallow history).
    pub fn rows(&mut self, commits: &[ObjectId]) -> Result<Vec<CommitRow>> {
        let mut out = Vec::with_capacity(commits.len());
        for oid in commits {
            let Some(mut row) = self.row(oid)? else {
                continue;
            };
            row.generation = self.generation(row.clone())?;
            out.push(row);
        }
        Ok(out)
    }

    /// The generation of `start`, walking its ancestors until their
    /// generations are known.
    fn generation(&mut self, start: CommitRow) -> Result<u32> {
        if start.generation != GENERATION_UNKNOWN {
            self.generations.insert(start.oid, start.generation);
            return Ok(start.generation);
        }
        if let Some(&g) = self.generations.get(&start.oid) {
            return Ok(g);
        }
        // Depth-first: a row stays on the stack until its parents' are known.
        let mut on_stack = gix_hashtable::HashSet::default();
        on_stack.insert(start.oid);
        let mut stack: Vec<CommitRow> = vec![start.clone()];
        while let Some(top) = stack.last() {
            if self.generations.contains_key(&top.oid) {
                on_stack.remove(&top.oid);
                stack.pop();
                continue;
            }
            let pending = top
                .parents
                .iter()
                .find(|p| !self.generations.contains_key(*p))
                .copied();
            match pending {
                Some(p) => match self.row(&p)? {
                    Some(row) if row.generation != GENERATION_UNKNOWN => {
                        self.generations.insert(p, row.generation);
                    }
                    Some(row) => {
                        // A parent already on the stack closes a cycle, which
                        // no hashed history has.
                        if !on_stack.insert(p) {
                            self.generations.insert(p, GENERATION_UNKNOWN);
                        } else {
                            stack.push(row);
                        }
                    }
                    None => {
                        self.generations.insert(p, GENERATION_UNKNOWN);
                    }
                },
                None => {
                    let top = stack.pop().expect("non-empty");
                    on_stack.remove(&top.oid);
                    let mut g = 1u32;
                    for p in &top.parents {
                        let pg = self.generations[p];
                        if pg == GENERATION_UNKNOWN {
                            g = GENERATION_UNKNOWN;
                            break;
                        }
                        g = g.max(pg.saturating_add(1));
                    }
                    self.generations.insert(top.oid, g);
                }
            }
        }
        Ok(self.generations[&start.oid])
    }
}

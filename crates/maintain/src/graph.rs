//! Commit graphs of the containers maintenance writes ([`gitstow_odb::graph`]).
//!
//! A merged or collected container gets the rows of the commits it stores:
//! taken from the sources' graphs when they have them, read from the
//! commits otherwise, and every generation number computed (down to the
//! root commits if no graph knows them: maintenance is where the unknown
//! generations a push could not fill in are completed).

use gitstow_odb::graph::{fill_generations, CommitRow, GENERATION_UNKNOWN};
use gitstow_odb::oids::{OidMap, OidSet};
use gitstow_odb::{ObjectCache, ObjectDb};
use gix_hash::ObjectId;

use crate::Result;

/// Rows and generations found so far, shared by the containers of one run.
pub struct GraphRows<'a> {
    db: &'a ObjectDb,
    cache: ObjectCache,
    /// Known generations ([`GENERATION_UNKNOWN`] past a missing parent).
    generations: OidMap<u32>,
}

impl<'a> GraphRows<'a> {
    /// Rows of the commits of `db` (the sources of a maintenance run).
    pub fn new(db: &'a ObjectDb) -> Self {
        GraphRows {
            db,
            cache: ObjectCache::new(16 << 20),
            generations: OidMap::new(),
        }
    }

    /// The rows of `commits`, every generation computed (unknown only past
    /// a parent the repository lacks, as in a shallow history): the
    /// ancestors whose generation no graph knows are read until known ones
    /// (or roots) are met, and [`fill_generations`] orders the rest.
    pub fn rows(&mut self, commits: &[ObjectId]) -> Result<Vec<CommitRow>> {
        let mut out = Vec::with_capacity(commits.len());
        for oid in commits {
            if let Some(row) = self.db.commit_row(oid, &mut self.cache)? {
                out.push(row);
            }
        }
        // The rows of unknown generation and their ancestors down to known
        // generations, computed together.
        let mut batch: Vec<CommitRow> = Vec::new();
        let mut listed = OidSet::new();
        let mut stack: Vec<ObjectId> = Vec::new();
        for row in &out {
            if row.generation != GENERATION_UNKNOWN {
                self.generations.insert(&row.oid, row.generation);
            } else if !self.generations.contains_key(&row.oid) && listed.insert(&row.oid) {
                stack.extend(row.parents.iter().copied());
                batch.push(row.clone());
            }
        }
        while let Some(p) = stack.pop() {
            if self.generations.contains_key(&p) || !listed.insert(&p) {
                continue;
            }
            match self.db.commit_row(&p, &mut self.cache)? {
                Some(row) if row.generation != GENERATION_UNKNOWN => {
                    self.generations.insert(&p, row.generation);
                }
                Some(row) => {
                    stack.extend(row.parents.iter().copied());
                    batch.push(row);
                }
                None => {
                    self.generations.insert(&p, GENERATION_UNKNOWN);
                }
            }
        }
        let known = &self.generations;
        fill_generations(&mut batch, |p| known.get(p).copied());
        for r in &batch {
            self.generations.insert(&r.oid, r.generation);
        }
        for row in &mut out {
            if let Some(&g) = self.generations.get(&row.oid) {
                row.generation = g;
            }
        }
        Ok(out)
    }
}

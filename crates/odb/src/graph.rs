//! Commit graph side files: for every commit a container stores, its root
//! tree, parents, committer time and generation number, readable without
//! inflating the commit (the data of git's `commit-graph`,
//! `gitformat-commit-graph(5)`, one file per container).
//!
//! A container `<id>` may have `<id>.graph` next to its `.bin` and `.idx`.
//! It is written when the container is sealed (by a push, or by maintenance
//! when it merges or collects containers) and never changed. Walks read a
//! commit from it when they can and inflate the commit otherwise: a missing
//! or unreadable graph (a container written before graphs existed, a
//! damaged file) costs time, never a wrong answer.
//!
//! Generation numbers are git's topological levels: 1 for a root commit,
//! otherwise one more than the largest of the parents'. A commit whose
//! parents' generations were not known when the file was written has
//! [`GENERATION_UNKNOWN`] (git's `GENERATION_NUMBER_ZERO`); maintenance
//! computes them all when it rewrites the container.
//!
//! Layout (integers big-endian):
//!
//! ```text
//! "GSCG" | version u32 = 1 | commits u32 | parent ids u32
//! commits × { oid[20] | tree[20] | time i64 | generation u32 | first parent u32 | parents u32 }
//!            (sorted by oid, distinct)
//! parent ids × oid[20]
//! CRC-32 of everything before it, u32
//! ```
//!
//! Version 2 is written for SHA-256 repositories (plan 0019): after the
//! version comes the hash id `u32` (1 SHA-1, 2 SHA-256, as in git's
//! commit-graph), and every oid (commit, tree, parent) is the hash's width.
//! A SHA-1 graph is still written as version 1, byte for byte.
//!
//! ```text
//! "GSCG" | version u32 = 2 | hash id u32 | commits u32 | parent ids u32
//! commits × { oid[w] | tree[w] | time i64 | generation u32 | first parent u32 | parents u32 }
//! parent ids × oid[w]
//! CRC-32 of everything before it, u32
//! ```

use gix_hash::ObjectId;

use crate::mapped::{Held, MapDir};

const MAGIC: &[u8; 4] = b"GSCG";
const VERSION: u32 = 1;
const VERSION_2: u32 = 2;
const HEADER: usize = 16;

/// Where a graph's rows start and how wide its oids are (by its version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    /// Bytes of an oid: 20 or 32.
    width: usize,
    /// Bytes before the first row.
    header: usize,
}

impl Layout {
    /// Version 1's.
    const SHA1: Layout = Layout {
        width: 20,
        header: HEADER,
    };

    /// Bytes of a row: two oids, the time, the generation and the parent range.
    fn row(&self) -> usize {
        2 * self.width + 8 + 4 + 4 + 4
    }
}

/// Generation of a commit whose ancestry was not known when its graph was written.
pub const GENERATION_UNKNOWN: u32 = 0;

/// One commit's entry, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitRow {
    /// The commit.
    pub oid: ObjectId,
    /// Its root tree.
    pub tree: ObjectId,
    /// Its parents, in order.
    pub parents: Vec<ObjectId>,
    /// Committer time, seconds since the epoch.
    pub time: i64,
    /// Topological level, or [`GENERATION_UNKNOWN`].
    pub generation: u32,
}

impl CommitRow {
    /// The row of commit `oid`, parsed as `c`, generation unknown.
    pub fn from_commit(oid: ObjectId, c: &gix_object::CommitRef<'_>) -> CommitRow {
        CommitRow {
            oid,
            tree: c.tree(),
            parents: {
                let mut parents: Vec<ObjectId> = c.parents().collect();
                parents.shrink_to_fit();
                parents
            },
            time: c.committer().map(|s| s.seconds()).unwrap_or(0),
            generation: GENERATION_UNKNOWN,
        }
    }

    /// The row of commit `oid` from its bytes (`gitformat-object`'s commit
    /// layout), generation unknown; the parser's message when they do not
    /// parse.
    ///
    /// A commit whose header is what git writes (see [`CommitRow::parse_header`])
    /// is read without allocating beyond its parent list; any other goes
    /// through `gix_object::CommitRef`, which accepts more and names the fault.
    pub fn parse(oid: ObjectId, data: &[u8]) -> Result<CommitRow, String> {
        if let Some(row) = CommitRow::parse_header(oid, data) {
            return Ok(row);
        }
        let c = gix_object::CommitRef::from_bytes(data, oid.kind()).map_err(|e| e.to_string())?;
        Ok(CommitRow::from_commit(oid, &c))
    }

    /// The row of commit `oid` when its header holds the lines git's
    /// `fsck_commit` checks (fsck.c), in git's form: `tree <hex>`, any
    /// `parent <hex>`, one `author <ident>` and one `committer <ident>`, each
    /// ident `name <email> <seconds> <+|-><hhmm>` (`fsck_ident`: no `<`, `>`
    /// or newline inside name or email, no zero-padded date), hex in lower
    /// case, of `oid`'s width (40 digits SHA-1, 64 SHA-256). What follows
    /// the committer line is not read. `None` for any other form: the
    /// caller decides with a full parser.
    pub fn parse_header(oid: ObjectId, data: &[u8]) -> Option<CommitRow> {
        let hex_len = oid.kind().len_in_hex();
        let header_oid = |s| header_oid(s, hex_len);
        let rest = data.strip_prefix(b"tree ")?;
        let (tree, mut rest) = header_oid(rest)?;
        // Exactly as many as there are: a row is held per pushed commit,
        // and a list grown by push holds room for four.
        let mut parents = Vec::with_capacity(parent_lines(rest));
        while let Some(r) = rest.strip_prefix(b"parent ") {
            let (parent, r) = header_oid(r)?;
            parents.push(parent);
            rest = r;
        }
        let (_, rest) = header_ident(rest.strip_prefix(b"author ")?)?;
        let (time, _) = header_ident(rest.strip_prefix(b"committer ")?)?;
        Some(CommitRow {
            oid,
            tree,
            parents,
            time,
            generation: GENERATION_UNKNOWN,
        })
    }

    /// The row of a commit a graph holds.
    pub fn from_graph(oid: ObjectId, c: &GraphCommit<'_>) -> CommitRow {
        CommitRow {
            oid,
            tree: c.tree,
            parents: c.parents.to_vec(),
            time: c.time,
            generation: c.generation,
        }
    }
}

/// `<40 lower-case hex>\n` at the start of `s`: the oid and what follows.
/// How many lines at the start of `s` begin with `parent `.
fn parent_lines(mut s: &[u8]) -> usize {
    let mut n = 0;
    while s.starts_with(b"parent ") {
        n += 1;
        s = s
            .iter()
            .position(|&b| b == b'\n')
            .map_or(&[], |end| &s[end + 1..]);
    }
    n
}

/// `hex_len` lower-case hex digits and a newline at the start of `s`: the
/// oid and what follows the line.
fn header_oid(s: &[u8], hex_len: usize) -> Option<(ObjectId, &[u8])> {
    let hex = s.get(..hex_len)?;
    if s.get(hex_len) != Some(&b'\n') || !hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    Some((ObjectId::from_hex(hex).ok()?, &s[hex_len + 1..]))
}

/// `name <email> <seconds> <+|-><hhmm>\n` at the start of `s` (git's
/// `fsck_ident`): the seconds and what follows the line.
fn header_ident(s: &[u8]) -> Option<(i64, &[u8])> {
    let lt = s.iter().position(|b| matches!(b, b'<' | b'>' | b'\n'))?;
    if s[lt] != b'<' || lt == 0 || s[lt - 1] != b' ' {
        return None;
    }
    let s = &s[lt + 1..];
    let gt = s.iter().position(|b| matches!(b, b'<' | b'>' | b'\n'))?;
    let s = s[gt..].strip_prefix(b"> ")?;
    let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 18 || (s[0] == b'0' && digits > 1) {
        return None;
    }
    let time = s[..digits]
        .iter()
        .fold(0i64, |t, d| t * 10 + i64::from(d - b'0'));
    let tz = s[digits..].strip_prefix(b" ")?.get(..6)?;
    if !matches!(tz[0], b'+' | b'-') || !tz[1..5].iter().all(u8::is_ascii_digit) || tz[5] != b'\n' {
        return None;
    }
    Some((time, &s[digits + 7..]))
}

/// A commit as a graph holds it.
#[derive(Debug, Clone, Copy)]
pub struct GraphCommit<'a> {
    /// Its root tree.
    pub tree: ObjectId,
    /// Its parents, in order.
    pub parents: Parents<'a>,
    /// Committer time, seconds since the epoch.
    pub time: i64,
    /// Topological level, or [`GENERATION_UNKNOWN`].
    pub generation: u32,
}

/// A commit's parent ids as the graph file holds them (`width` bytes each).
#[derive(Debug, Clone, Copy)]
pub struct Parents<'a> {
    bytes: &'a [u8],
    width: usize,
}

impl<'a> Parents<'a> {
    /// Number of parents.
    pub fn len(&self) -> usize {
        self.bytes.len() / self.width
    }

    /// True for a root commit.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The parents, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = ObjectId> + 'a {
        self.bytes
            .chunks_exact(self.width)
            .map(ObjectId::from_bytes_or_panic)
    }

    /// The parents in a vector.
    pub fn to_vec(&self) -> Vec<ObjectId> {
        self.iter().collect()
    }
}

/// A decoded graph file, read in place: its checked bytes, on the heap or
/// mapped ([`CommitGraph::mapped`]).
#[derive(Debug)]
pub struct CommitGraph {
    bytes: Held,
    commits: usize,
    layout: Layout,
}

/// Why a graph file could not be read.
#[derive(Debug, thiserror::Error)]
#[error("commit graph is unreadable: {0}")]
pub struct GraphError(String);

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().expect("4 bytes"))
}

impl CommitGraph {
    /// Encodes `rows` (sorted here; a commit given twice is written once):
    /// version 1 for SHA-1 oids, version 2 for SHA-256 ones (all of one
    /// width, as one repository's are).
    pub fn encode(rows: &mut Vec<CommitRow>) -> Vec<u8> {
        rows.sort_by_key(|r| r.oid);
        rows.dedup_by(|a, b| a.oid == b.oid);
        let width = rows.first().map_or(20, |r| r.oid.as_slice().len());
        let layout = Layout {
            width,
            header: if width == 20 { HEADER } else { HEADER + 4 },
        };
        let parent_ids: usize = rows.iter().map(|r| r.parents.len()).sum();
        let mut out =
            Vec::with_capacity(layout.header + rows.len() * layout.row() + parent_ids * width + 4);
        out.extend_from_slice(MAGIC);
        if width == 20 {
            out.extend_from_slice(&VERSION.to_be_bytes());
        } else {
            out.extend_from_slice(&VERSION_2.to_be_bytes());
            out.extend_from_slice(&u32::from(crate::SHA256_HASH_ID).to_be_bytes());
        }
        out.extend_from_slice(&(rows.len() as u32).to_be_bytes());
        out.extend_from_slice(&(parent_ids as u32).to_be_bytes());
        let mut first = 0u32;
        for r in rows.iter() {
            out.extend_from_slice(r.oid.as_bytes());
            out.extend_from_slice(r.tree.as_bytes());
            out.extend_from_slice(&r.time.to_be_bytes());
            out.extend_from_slice(&r.generation.to_be_bytes());
            out.extend_from_slice(&first.to_be_bytes());
            out.extend_from_slice(&(r.parents.len() as u32).to_be_bytes());
            first += r.parents.len() as u32;
        }
        for r in rows.iter() {
            for p in &r.parents {
                out.extend_from_slice(p.as_bytes());
            }
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Decodes what [`CommitGraph::encode`] wrote, checking its checksum,
    /// order and parent ranges (a copy of `bytes` is kept).
    pub fn decode(bytes: &[u8]) -> Result<CommitGraph, GraphError> {
        Self::decode_owned(bytes.to_vec())
    }

    /// [`CommitGraph::decode`] keeping `bytes` themselves.
    pub fn decode_owned(bytes: Vec<u8>) -> Result<CommitGraph, GraphError> {
        let (commits, layout) = Self::check(&bytes)?;
        Ok(CommitGraph {
            bytes: Held::Heap(bytes),
            commits,
            layout,
        })
    }

    /// The number of commits and the layout of a well-formed graph file `bytes`.
    fn check(bytes: &[u8]) -> Result<(usize, Layout), GraphError> {
        let bad = |why: &str| GraphError(why.to_owned());
        if bytes.len() < HEADER + 4 || &bytes[..4] != MAGIC {
            return Err(bad("not a commit graph"));
        }
        let layout = match be32(&bytes[4..]) {
            VERSION => Layout::SHA1,
            VERSION_2 if bytes.len() >= HEADER + 8 => {
                let id = be32(&bytes[8..]);
                Layout {
                    width: crate::width_of_hash_id(id)
                        .ok_or_else(|| GraphError(format!("unknown hash id {id}")))?,
                    header: HEADER + 4,
                }
            }
            VERSION_2 => return Err(bad("not a commit graph")),
            version => {
                return Err(GraphError(format!(
                    "version {version}, this build reads {VERSION} and {VERSION_2}"
                )))
            }
        };
        let (body, trailer) = bytes.split_at(bytes.len() - 4);
        if crc32fast::hash(body) != be32(trailer) {
            return Err(bad("checksum mismatch"));
        }
        let (w, h, row_len) = (layout.width, layout.header, layout.row());
        let commits = be32(&bytes[h - 8..]) as usize;
        let parent_ids = be32(&bytes[h - 4..]) as usize;
        let expected = commits
            .checked_mul(row_len)
            .and_then(|n| n.checked_add(parent_ids.checked_mul(w)?))
            .and_then(|n| n.checked_add(h));
        if expected != Some(body.len()) {
            return Err(bad("length does not match its header"));
        }
        let rows_end = h + commits * row_len;
        let parents = parent_ids as u64;
        let mut last: Option<&[u8]> = None;
        for row in body[h..rows_end].chunks_exact(row_len) {
            if last.is_some_and(|l| l >= &row[..w]) {
                return Err(bad("commits out of order"));
            }
            last = Some(&row[..w]);
            let first = u64::from(be32(&row[2 * w + 12..]));
            let count = u64::from(be32(&row[2 * w + 16..]));
            if first + count > parents {
                return Err(bad("parent range out of bounds"));
            }
        }
        Ok((commits, layout))
    }

    /// This graph mapped from a file in `dir` when it is large enough
    /// ([`crate::mapped`]): what a server's cache holds. A failure to write
    /// the file is logged and the graph kept as it is.
    pub fn mapped(self, dir: &MapDir) -> CommitGraph {
        let bytes = match self.bytes {
            Held::Heap(bytes) => Held::spill(bytes, dir),
            mapped => mapped,
        };
        CommitGraph { bytes, ..self }
    }

    /// Drops the pages of a mapped graph from the resident set (see
    /// [`crate::mapped`]); nothing for one on the heap.
    pub fn release_pages(&self) {
        self.bytes.release_pages();
    }

    /// Whether the graph is mapped from a file ([`CommitGraph::mapped`]).
    pub fn is_mapped(&self) -> bool {
        self.bytes.is_mapped()
    }

    /// Commit `oid`, if this graph has it.
    pub fn find(&self, oid: &gix_hash::oid) -> Option<GraphCommit<'_>> {
        let Layout { width: w, header } = self.layout;
        if oid.as_bytes().len() != w {
            return None;
        }
        let row_len = self.layout.row();
        let rows = &self.bytes[header..header + self.commits * row_len];
        let row_at = |i: usize| &rows[i * row_len..(i + 1) * row_len];
        let (mut lo, mut hi) = (0, self.commits);
        let at = loop {
            if lo >= hi {
                return None;
            }
            let mid = lo + (hi - lo) / 2;
            match row_at(mid)[..w].cmp(oid.as_bytes()) {
                std::cmp::Ordering::Equal => break mid,
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
            }
        };
        let row = row_at(at);
        let first = be32(&row[2 * w + 12..]) as usize;
        let count = be32(&row[2 * w + 16..]) as usize;
        let parents_at = header + self.commits * row_len + first * w;
        Some(GraphCommit {
            tree: ObjectId::from_bytes_or_panic(&row[w..2 * w]),
            parents: Parents {
                bytes: &self.bytes[parents_at..parents_at + count * w],
                width: w,
            },
            time: i64::from_be_bytes(row[2 * w..2 * w + 8].try_into().expect("8 bytes")),
            generation: be32(&row[2 * w + 8..]),
        })
    }

    /// Number of commits.
    pub fn len(&self) -> usize {
        self.commits
    }

    /// True when it has no commit.
    pub fn is_empty(&self) -> bool {
        self.commits == 0
    }
}

/// Fills in the generation of every row of `rows` whose generation is
/// unknown: 1 + the largest generation of its parents, each found among
/// `rows` or by `elsewhere` (`None`: not known). A row with a parent of
/// unknown generation stays [`GENERATION_UNKNOWN`].
pub fn fill_generations(
    rows: &mut [CommitRow],
    mut elsewhere: impl FnMut(&ObjectId) -> Option<u32>,
) {
    let mut at: crate::oids::OidMap<u32> = crate::oids::OidMap::new();
    at.reserve(rows.len());
    for (i, r) in rows.iter().enumerate() {
        at.insert(&r.oid, i as u32);
    }
    let at = |p: &ObjectId| at.get(p).map(|&j| j as usize);
    // 0: not visited, 1: on the stack, 2: done.
    let mut mark = vec![0u8; rows.len()];
    for start in 0..rows.len() {
        if mark[start] != 0 {
            continue;
        }
        let mut stack = vec![start];
        while let Some(&i) = stack.last() {
            if mark[i] == 0 {
                mark[i] = 1;
                if rows[i].generation == GENERATION_UNKNOWN {
                    for p in &rows[i].parents {
                        if let Some(j) = at(p) {
                            if mark[j] == 0 {
                                stack.push(j);
                            }
                        }
                    }
                }
                continue;
            }
            stack.pop();
            if mark[i] == 2 {
                continue;
            }
            mark[i] = 2;
            if rows[i].generation != GENERATION_UNKNOWN {
                continue;
            }
            let mut generation = 1u32;
            for p in &rows[i].parents {
                let g = match at(p) {
                    // A parent still on the stack closes a cycle, which no
                    // hashed history has: leave the generation unknown.
                    Some(j) if mark[j] == 2 => rows[j].generation,
                    Some(_) => GENERATION_UNKNOWN,
                    None => elsewhere(p).unwrap_or(GENERATION_UNKNOWN),
                };
                if g == GENERATION_UNKNOWN {
                    generation = GENERATION_UNKNOWN;
                    break;
                }
                generation = generation.max(g.saturating_add(1));
            }
            rows[i].generation = generation;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oid(n: u8) -> ObjectId {
        ObjectId::from_bytes_or_panic(&[n; 20])
    }

    fn row(n: u8, parents: &[u8]) -> CommitRow {
        CommitRow {
            oid: oid(n),
            tree: oid(200 + n % 50),
            parents: parents.iter().map(|&p| oid(p)).collect(),
            time: 1_000 + n as i64,
            generation: GENERATION_UNKNOWN,
        }
    }

    /// The full parser's row, for comparison.
    fn parsed_by_gix(data: &[u8]) -> Option<CommitRow> {
        let c = gix_object::CommitRef::from_bytes(data, gix_hash::Kind::Sha1).ok()?;
        Some(CommitRow::from_commit(oid(9), &c))
    }

    #[test]
    fn header_rows_agree_with_the_full_parser() {
        let t = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
        let p1 = "0123456789abcdef0123456789abcdef01234567";
        let p2 = "89abcdef0123456789abcdef0123456789abcdef";
        let commits = [
            format!("tree {t}\nauthor A U Thor <a@example.com> 1700000000 +0000\ncommitter C O Mitter <c@example.com> 1700000001 -0700\n\nroot\n"),
            format!("tree {t}\nparent {p1}\nauthor A <a@e> 0 +0000\ncommitter  <> 5 +1400\n\none parent\n"),
            format!("tree {t}\nparent {p1}\nparent {p2}\nauthor A <a@e> 1 +0000\ncommitter C <c@e> 2 +0000\nencoding ISO-8859-1\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n abc\n -----END PGP SIGNATURE-----\n\nmerge\n"),
        ];
        for c in &commits {
            let fast = CommitRow::parse_header(oid(9), c.as_bytes()).expect(c);
            assert_eq!(Some(&fast), parsed_by_gix(c.as_bytes()).as_ref(), "{c}");
            // A row held per pushed commit keeps no spare room for parents.
            assert_eq!(fast.parents.capacity(), fast.parents.len(), "{c}");
            assert_eq!(CommitRow::parse(oid(9), c.as_bytes()).unwrap(), fast);
        }
        assert_eq!(
            CommitRow::parse_header(oid(9), commits[2].as_bytes())
                .unwrap()
                .parents,
            vec![
                ObjectId::from_hex(p1.as_bytes()).unwrap(),
                ObjectId::from_hex(p2.as_bytes()).unwrap()
            ]
        );
    }

    #[test]
    fn sha256_commits_parse_at_their_width() {
        let t = "ab".repeat(32);
        let p = "cd".repeat(32);
        let c = format!(
            "tree {t}\nparent {p}\nauthor A <a@e> 1 +0000\ncommitter C <c@e> 2 +0000\n\nx\n"
        );
        let wide = ObjectId::from_bytes_or_panic(&[9; 32]);
        let fast = CommitRow::parse_header(wide, c.as_bytes()).expect("git's form");
        assert_eq!(fast.tree.to_string(), t);
        assert_eq!(
            fast.parents
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>(),
            [p]
        );
        let full = gix_object::CommitRef::from_bytes(c.as_bytes(), gix_hash::Kind::Sha256).unwrap();
        assert_eq!(CommitRow::from_commit(wide, &full), fast);
        // A SHA-256 commit read as SHA-1 (or the reverse) is not git's form.
        assert_eq!(CommitRow::parse_header(oid(9), c.as_bytes()), None);
    }

    #[test]
    fn headers_not_in_git_form_go_to_the_full_parser() {
        let t = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
        let ok = "A <a@e> 1 +0000";
        let odd = [
            format!("author {ok}\ncommitter {ok}\n\nno tree\n"),
            format!("tree {}\nauthor {ok}\ncommitter {ok}\n\n", t.to_uppercase()),
            format!("tree {t}x\nauthor {ok}\ncommitter {ok}\n\n"),
            format!("tree {t}\nparent 1234\nauthor {ok}\ncommitter {ok}\n\n"),
            format!("tree {t}\ncommitter {ok}\n\nno author\n"),
            format!("tree {t}\nauthor {ok}\n\nno committer\n"),
            format!("tree {t}\nauthor <a@e> 1 +0000\ncommitter {ok}\n\n"),
            format!("tree {t}\nauthor A<a@e> 1 +0000\ncommitter {ok}\n\n"),
            format!("tree {t}\nauthor A <a@e 1 +0000\ncommitter {ok}\n\n"),
            format!("tree {t}\nauthor A <a<@e> 1 +0000\ncommitter {ok}\n\n"),
            format!("tree {t}\nauthor A <a@e>1 +0000\ncommitter {ok}\n\n"),
            format!("tree {t}\nauthor A <a@e> 01 +0000\ncommitter {ok}\n\n"),
            format!("tree {t}\nauthor A <a@e> x +0000\ncommitter {ok}\n\n"),
            format!("tree {t}\nauthor A <a@e> 1 0000\ncommitter {ok}\n\n"),
            format!("tree {t}\nauthor A <a@e> 1 +000\ncommitter {ok}\n\n"),
            format!("tree {t}\nauthor A <a@e> 1 +0000 \ncommitter {ok}\n\n"),
            format!("tree {t}\nauthor A <a@e> 99999999999999999999 +0000\ncommitter {ok}\n\n"),
            format!("tree {t}\nauthor {ok}\ncommitter {ok}"),
        ];
        for c in &odd {
            assert_eq!(CommitRow::parse_header(oid(9), c.as_bytes()), None, "{c}");
        }
        assert!(CommitRow::parse(oid(9), odd[0].as_bytes()).is_err());
    }

    #[test]
    fn a_sha1_graph_is_written_byte_for_byte_as_before() {
        use sha2::Digest;
        let mut rows = vec![row(3, &[1, 2]), row(1, &[]), row(2, &[1])];
        fill_generations(&mut rows, |_| None);
        let digest = hex::encode(sha2::Sha256::digest(CommitGraph::encode(&mut rows)));
        // The bytes every build since before SHA-256 writes (computed at
        // 89d54bb): a SHA-1 repository's files do not change.
        assert_eq!(
            digest,
            "44aadc7b704027673e6dd655c26b14112bf7e104bb36249ec8804853b41d1a76"
        );
    }

    #[test]
    fn rows_round_trip_and_are_found() {
        let mut rows = vec![row(3, &[1, 2]), row(1, &[]), row(2, &[1]), row(2, &[1])];
        fill_generations(&mut rows, |_| None);
        let bytes = CommitGraph::encode(&mut rows);
        let g = CommitGraph::decode(&bytes).unwrap();
        assert_eq!(g.len(), 3);
        let c = g.find(&oid(3)).unwrap();
        assert_eq!(c.parents.to_vec(), vec![oid(1), oid(2)]);
        assert_eq!(c.tree, oid(203));
        assert_eq!(c.time, 1_003);
        assert_eq!(c.generation, 3);
        assert_eq!(g.find(&oid(1)).unwrap().generation, 1);
        assert!(g.find(&oid(9)).is_none());
    }

    #[test]
    fn a_sha256_graph_is_version_2_and_round_trips() {
        let wide = |o: ObjectId| {
            let mut raw = [0x77u8; 32];
            raw[..20].copy_from_slice(o.as_slice());
            ObjectId::from_bytes_or_panic(&raw)
        };
        let widen = |r: CommitRow| CommitRow {
            oid: wide(r.oid),
            tree: wide(r.tree),
            parents: r.parents.into_iter().map(wide).collect(),
            ..r
        };
        let mut rows: Vec<CommitRow> = [row(3, &[1, 2]), row(1, &[]), row(2, &[1])]
            .into_iter()
            .map(widen)
            .collect();
        fill_generations(&mut rows, |_| None);
        let bytes = CommitGraph::encode(&mut rows);
        assert_eq!(
            (be32(&bytes[4..]), be32(&bytes[8..])),
            (2, 2),
            "version 2, SHA-256"
        );
        let g = CommitGraph::decode(&bytes).unwrap();
        assert_eq!(g.len(), 3);
        let c = g.find(&wide(oid(3))).unwrap();
        assert_eq!(c.parents.to_vec(), vec![wide(oid(1)), wide(oid(2))]);
        assert_eq!((c.tree, c.time, c.generation), (wide(oid(203)), 1_003, 3));
        // A SHA-1 oid is never found in a SHA-256 graph, nor the reverse.
        assert!(g.find(&oid(3)).is_none());
        let mut sha1 = vec![row(3, &[1, 2])];
        let one = CommitGraph::decode(&CommitGraph::encode(&mut sha1)).unwrap();
        assert!(one.find(&wide(oid(3))).is_none());
        // SHA-1 graphs stay version 1.
        assert_eq!(be32(&CommitGraph::encode(&mut sha1)[4..]), 1);
        // An unknown hash id is refused.
        let mut bad = bytes.clone();
        bad[11] = 3;
        let n = bad.len() - 4;
        let crc = crc32fast::hash(&bad[..n]).to_be_bytes();
        bad[n..].copy_from_slice(&crc);
        assert!(CommitGraph::decode(&bad).is_err());
    }

    #[test]
    fn a_mapped_graph_reads_as_the_heap_one() {
        // 8,000 commits (600 kB: above the mapping threshold), each with
        // the one before as its parent, every tenth a merge of two.
        let id = |i: u32| {
            let mut raw = [0u8; 20];
            raw[..4].copy_from_slice(&i.wrapping_mul(2_654_435_761).to_be_bytes());
            raw[4..8].copy_from_slice(&i.to_be_bytes());
            ObjectId::from_bytes_or_panic(&raw)
        };
        let mut rows: Vec<CommitRow> = (0..8_000u32)
            .map(|i| CommitRow {
                oid: id(i),
                tree: id(i + 100_000),
                parents: match i {
                    0 => vec![],
                    i if i % 10 == 0 => vec![id(i - 1), id(i / 2)],
                    i => vec![id(i - 1)],
                },
                time: i64::from(i),
                generation: GENERATION_UNKNOWN,
            })
            .collect();
        fill_generations(&mut rows, |_| None);
        let heap = CommitGraph::decode(&CommitGraph::encode(&mut rows)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mapped = CommitGraph::decode(&CommitGraph::encode(&mut rows))
            .unwrap()
            .mapped(&MapDir::new(dir.path()));
        assert!(mapped.is_mapped() && !heap.is_mapped());
        mapped.release_pages();
        for r in &rows {
            let (a, b) = (mapped.find(&r.oid).unwrap(), heap.find(&r.oid).unwrap());
            assert_eq!(CommitRow::from_graph(r.oid, &a), *r);
            assert_eq!(CommitRow::from_graph(r.oid, &b), *r);
        }
        assert!(mapped.find(&id(9_000)).is_none());
    }

    #[test]
    fn generations_use_known_parents_and_stay_unknown_otherwise() {
        // 5 <- 6 <- 7, 5 known elsewhere at 10; 8's parent 9 is unknown.
        let mut rows = vec![row(7, &[6]), row(6, &[5]), row(8, &[9]), row(4, &[8])];
        fill_generations(&mut rows, |p| (*p == oid(5)).then_some(10));
        let g: Vec<u32> = rows.iter().map(|r| r.generation).collect();
        assert_eq!(g, vec![12, 11, GENERATION_UNKNOWN, GENERATION_UNKNOWN]);
    }

    #[test]
    fn damaged_files_are_refused() {
        let mut rows = vec![row(1, &[]), row(2, &[1])];
        let bytes = CommitGraph::encode(&mut rows);
        for i in [0, 5, 20, 40, bytes.len() - 30, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(CommitGraph::decode(&bad).is_err(), "flip at {i}");
        }
        assert!(CommitGraph::decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(CommitGraph::decode(b"").is_err());
        assert!(CommitGraph::decode(b"junkjunkjunkjunkjunk").is_err());
    }
}

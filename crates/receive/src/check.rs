//! Object checks done while resolving: every object must parse (gix-object),
//! and the objects it names are collected for the connectivity check.

use gitstow_odb::oids::{OidSet, OidVec};
use gitstow_odb::recent::RecentOids;
use gix_hash::ObjectId;
use gix_object::Kind;

/// What the checks collect from one resolver thread.
#[derive(Debug, Default)]
pub struct Collected {
    /// Objects named by pushed commits, trees (except gitlinks) and tags
    /// since the last [`Collected::flush_references`]: the resolver threads
    /// keep one set of them together (one set per thread held most oids
    /// twice, in two tables growing by doubling).
    pub references: OidVec<()>,
    /// Oids recently added to `references`: a tree resolved from its delta
    /// base names mostly what the base named, and a hit here keeps a name
    /// the thread just collected from reaching the shared set again.
    recent: RecentOids,
    /// (tag oid, target oid) of every pushed annotated tag, for peeling.
    pub tag_targets: Vec<(ObjectId, ObjectId)>,
    /// Every object of the push, in resolution order.
    pub oids: OidVec<Kind>,
    /// Every pushed commit's commit-graph row (generation not yet known).
    pub commits: Vec<gitstow_odb::graph::CommitRow>,
}

impl Collected {
    /// How many references [`Collected::flush_references`] waits for.
    pub const FLUSH_AT: usize = 8192;

    /// Moves the references collected so far into `set` (one lock for
    /// all); a buffer one large tree grew past [`Collected::FLUSH_AT`]
    /// names is shrunk back.
    pub fn flush_references(&mut self, set: &std::sync::Mutex<OidSet>) {
        if self.references.is_empty() {
            return;
        }
        set.lock()
            .unwrap_or_else(|p| p.into_inner())
            .take_from(&mut self.references);
        self.references.shrink_to(2 * Self::FLUSH_AT);
    }

    /// [`Collected::flush_references`] once [`Collected::FLUSH_AT`]
    /// references are waiting.
    pub fn flush_when_full(&mut self, set: &std::sync::Mutex<OidSet>) {
        if self.references.len() >= Self::FLUSH_AT {
            self.flush_references(set);
        }
    }

    /// Records a pushed object (grown as [`push_stepped`] grows a table).
    pub fn push_oid(&mut self, oid: &gix_hash::oid, kind: Kind) {
        if self.oids.len() == self.oids.capacity() {
            self.oids
                .reserve_exact(oid, step_for(self.oids.len(), OIDS_STEP));
        }
        self.oids.push(oid, kind);
    }
}

/// Pushes `item`, growing `v` by doubling up to `step` items, then by
/// `step` items or an eighth of its length, whichever is more: a table of
/// one item per pushed object, on each resolver thread, stays within an
/// eighth of its length (or `step`) of it, and is copied a bounded number
/// of times per item.
fn push_stepped<T>(v: &mut Vec<T>, item: T, step: usize) {
    if v.len() == v.capacity() {
        v.reserve_exact(step_for(v.len(), step));
    }
    v.push(item);
}

/// How many items [`push_stepped`] adds to a full table of `len` items.
fn step_for(len: usize, step: usize) -> usize {
    if len < step {
        len.max(64)
    } else {
        step.max(len / 8)
    }
}

/// Growth steps of [`Collected::oids`] (1.5 MiB) and [`Collected::commits`].
const OIDS_STEP: usize = 1 << 16;
const COMMITS_STEP: usize = 1 << 13;

/// Parses `data` as an object of `kind`; on success records what it names.
/// The error is the reason reported to the client.
pub fn check_object(
    oid: &ObjectId,
    kind: Kind,
    data: &[u8],
    out: &mut Collected,
) -> Result<(), String> {
    match kind {
        Kind::Tree => {
            // Walked in place (no entry list is allocated): git fsck's tree
            // rules, and every entry but a gitlink names an object the push
            // must have.
            let (refs, recent) = (&mut out.references, &mut out.recent);
            fsck_tree_entries(data, oid.kind().len_in_bytes(), |entry, gitlink| {
                let entry = gix_hash::oid::from_bytes_unchecked(entry);
                if !gitlink && !recent.hit_or_insert(entry) {
                    refs.push(entry, ());
                }
            })
            .map_err(|why| format!("invalid tree object {oid}: {why}"))?;
        }
        Kind::Commit => {
            let row = gitstow_odb::graph::CommitRow::parse(*oid, data)
                .map_err(|e| format!("invalid {kind} object {oid}: {e}"))?;
            out.references.push(&row.tree, ());
            for parent in &row.parents {
                out.references.push(parent, ());
            }
            push_stepped(&mut out.commits, row, COMMITS_STEP);
        }
        Kind::Tag => {
            let target = gix_object::TagRef::from_bytes(data, oid.kind())
                .map_err(|e| format!("invalid {kind} object {oid}: {e}"))?
                .target();
            out.references.push(&target, ());
            out.tag_targets.push((*oid, target));
        }
        Kind::Blob => {}
    }
    out.push_oid(oid, kind);
    Ok(())
}

/// The tree rules of git's `fsck` (fsck.c `fsck_tree`) that matter to a
/// server: every mode is one git writes, names are plain path components
/// (not empty, no `/`, not `.`, `..` or `.git` in any spelling HFS+ or NTFS
/// would fold to it), and entries are sorted in git's tree order without
/// duplicates. Zero-padded modes (`040000`) are accepted: git's fsck only warns
/// about them and old histories carry them. The error names the fsck message id.
pub fn fsck_tree(data: &[u8], width: usize) -> Result<(), String> {
    fsck_tree_entries(data, width, |_, _| {})
}

/// [`fsck_tree`] of a tree whose entries' ids are `width` bytes (20 SHA-1,
/// 32 SHA-256), calling `entry(oid_bytes, is_gitlink)` for every entry as
/// it goes.
pub fn fsck_tree_entries(
    mut data: &[u8],
    width: usize,
    mut entry: impl FnMut(&[u8], bool),
) -> Result<(), String> {
    let mut prev: Option<(&[u8], bool)> = None;
    while !data.is_empty() {
        // Modes are a few bytes and names short: plain loops beat memchr's
        // calls here (tens of millions of entries in a large history).
        let sp = match data.iter().take(8).position(|&b| b == b' ') {
            Some(sp) => sp,
            None if memchr::memchr(b' ', data).is_some() => {
                return Err("badFilemode: contains bad file modes".into())
            }
            None => return Err("badTree: truncated entry".into()),
        };
        let mode = &data[..sp];
        let rest = &data[sp + 1..];
        let (nul, slash, ascii) = scan_name(rest).ok_or("badTree: truncated entry")?;
        let name = &rest[..nul];
        if rest.len() < nul + 1 + width {
            return Err("badTree: truncated entry".into());
        }
        let oid = &rest[nul + 1..nul + 1 + width];
        data = &rest[nul + 1 + width..];
        let is_tree = match mode {
            // git fsck only warns about zero-padded modes (old histories have them): accept.
            b"40000" | b"040000" => true,
            b"100644" | b"100755" | b"120000" | b"160000" | b"100664" => false,
            m if m.first() == Some(&b'0')
                && m.len() == 7
                && matches!(&m[1..], b"100644" | b"100755" | b"120000" | b"160000") =>
            {
                false
            }
            _ => return Err("badFilemode: contains bad file modes".into()),
        };
        if slash {
            return Err("fullPathname: contains full pathnames".into());
        }
        check_name(name, ascii)?;
        if let Some((p_name, p_tree)) = prev {
            let (order, same_name) = tree_order(p_name, p_tree, name, is_tree);
            if same_name {
                return Err("duplicateEntries: contains duplicate file entries".into());
            }
            if order != std::cmp::Ordering::Less {
                return Err("treeNotSorted: not properly sorted".into());
            }
        }
        prev = Some((name, is_tree));
        let gitlink = matches!(mode, b"160000" | b"0160000");
        entry(oid, gitlink);
    }
    Ok(())
}

/// The end of the NUL-terminated name at the start of `rest`: its length,
/// whether it holds a `/`, whether it is all ASCII; `None` without a NUL.
/// Eight bytes at a time (names are short, and a tree entry's name is read
/// for each of the tens of millions of entries of a large history).
#[inline]
fn scan_name(rest: &[u8]) -> Option<(usize, bool, bool)> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const SLASHES: u64 = ONES * b'/' as u64;
    // Non-zero when some byte of `v` is zero (exact: a borrow only marks
    // bytes above a zero byte).
    let zero_in = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let mut i = 0;
    let mut high = 0;
    while let Some(chunk) = rest.get(i..i + 8) {
        let v = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        if zero_in(v) | zero_in(v ^ SLASHES) != 0 {
            break;
        }
        high |= v & HIGH;
        i += 8;
    }
    let mut slash = false;
    loop {
        match *rest.get(i)? {
            0 => return Some((i, slash, high == 0)),
            b'/' => slash = true,
            b if b >= 0x80 => high = HIGH,
            _ => {}
        }
        i += 1;
    }
}

/// A tree entry's name as git's fsck wants it: not empty, not `.` or `..`,
/// and not `.git` in any spelling HFS+ or NTFS folds to it (gix-validate's
/// rules). Only a name that starts with `.`, `g` or `G`, or has a byte
/// outside ASCII, can break them (the code points HFS+ ignores are not
/// ASCII; NTFS's spellings are `.git` and `git~1` with trailing dots and
/// spaces): any other name, nearly every name of a real tree, is not
/// looked at further.
/// `ascii`: whether `name` is all ASCII (its caller has just read it).
fn check_name(name: &[u8], ascii: bool) -> Result<(), String> {
    let may_break = name.first().is_none_or(|b| matches!(b, b'.' | b'g' | b'G')) || !ascii;
    if !may_break {
        return Ok(());
    }
    let opts = gix_validate::path::component::Options {
        protect_windows: false,
        protect_hfs: true,
        protect_ntfs: true,
    };
    gix_validate::path::component(name.into(), None, opts).map_err(|e| {
        use gix_validate::path::component::Error as E;
        match e {
            E::Empty => "emptyName: contains empty pathname".into(),
            E::DotGitDir => "hasDotgit: contains '.git'".into(),
            other => format!("badTree: {other}"),
        }
    })?;
    Ok(())
}

/// git's `base_name_compare`: names compare bytewise, a tree as if it ended
/// in `/`; and whether the two names are the same (whatever their modes).
fn tree_order(a: &[u8], a_tree: bool, b: &[u8], b_tree: bool) -> (std::cmp::Ordering, bool) {
    let n = a.len().min(b.len());
    // Neighbouring names differ early: a loop, not a call to memcmp.
    if let Some(i) = (0..n).find(|&i| a[i] != b[i]) {
        return (a[i].cmp(&b[i]), false);
    }
    let end = |s: &[u8], tree: bool| s.get(n).copied().or(if tree { Some(b'/') } else { None });
    (end(a, a_tree).cmp(&end(b, b_tree)), a.len() == b.len())
}

/// The threads' collections put together.
#[derive(Debug, Default)]
pub struct Merged {
    /// Every object of the pack with its kind, sorted by oid, no duplicates.
    pub oids: OidVec<Kind>,
    /// (tag oid, target oid) of every pushed annotated tag.
    pub tag_targets: Vec<(ObjectId, ObjectId)>,
    /// Every pushed commit's commit-graph row (unordered; generations unknown).
    pub commits: Vec<gitstow_odb::graph::CommitRow>,
}

/// Puts the threads' collections together: each table grows from the
/// largest thread's by what the others hold.
pub fn merge(mut collected: Vec<Collected>) -> Merged {
    collected.sort_unstable_by_key(|c| std::cmp::Reverse(c.oids.len()));
    let mut rest = collected.into_iter();
    let mut all = rest.next().unwrap_or_default();
    let rest: Vec<Collected> = rest.collect();
    if let Some((first, _)) = all.oids.get(0) {
        let first = first.to_owned();
        all.oids
            .reserve_exact(&first, rest.iter().map(|c| c.oids.len()).sum());
    }
    all.commits
        .reserve_exact(rest.iter().map(|c| c.commits.len()).sum());
    for c in rest {
        all.tag_targets.extend(c.tag_targets);
        all.commits.extend(c.commits);
        all.oids.append(c.oids);
    }
    all.oids.sort_dedup();
    Merged {
        oids: all.oids,
        tag_targets: all.tag_targets,
        commits: all.commits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(entries: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (mode, name) in entries {
            out.extend_from_slice(mode.as_bytes());
            out.push(b' ');
            out.extend_from_slice(name.as_bytes());
            out.push(0);
            out.extend_from_slice(&[0x11; 20]);
        }
        out
    }

    #[test]
    fn tables_grow_by_doubling_then_by_steps_or_an_eighth() {
        let mut v: Vec<u32> = Vec::new();
        let mut grew = 0;
        for i in 0..2_000_000u32 {
            let cap = v.capacity();
            push_stepped(&mut v, i, 1 << 16);
            if v.capacity() != cap {
                grew += 1;
                // Slack: the step below 8 × step, an eighth above it.
                let slack = v.capacity() - v.len();
                assert!(
                    slack <= (v.len() / 8).max(1 << 16),
                    "{} of {}",
                    slack,
                    v.len()
                );
            }
        }
        assert_eq!(v.len(), 2_000_000);
        assert!(grew < 40, "{grew} growths");
    }

    #[test]
    fn every_referenced_oid_reaches_the_set_even_the_null_one() {
        let mut out = Collected::default();
        let null = [0u8; 20];
        let mut data = b"100644 a\0".to_vec();
        data.extend_from_slice(&null);
        let oid = ObjectId::from_bytes_or_panic(&[7; 20]);
        let set = std::sync::Mutex::new(OidSet::new());
        check_object(&oid, Kind::Tree, &data, &mut out).unwrap();
        check_object(&oid, Kind::Tree, &data, &mut out).unwrap();
        assert_eq!(out.references.len(), 1, "the second is a recent hit");
        out.flush_references(&set);
        assert!(out.references.is_empty());
        assert!(set
            .lock()
            .unwrap()
            .contains(&ObjectId::from_bytes_or_panic(&null)));
        // Two oids sharing a slot (same first three bytes) both reach the set.
        let (mut x, mut y) = ([1u8; 20], [2u8; 20]);
        x[..3].copy_from_slice(&[5, 5, 5]);
        y[..3].copy_from_slice(&[5, 5, 5]);
        let mut two = b"100644 x\0".to_vec();
        two.extend_from_slice(&x);
        two.extend_from_slice(b"100644 y\0");
        two.extend_from_slice(&y);
        check_object(&oid, Kind::Tree, &two, &mut out).unwrap();
        out.flush_references(&set);
        for o in [x, y] {
            assert!(set
                .lock()
                .unwrap()
                .contains(&ObjectId::from_bytes_or_panic(&o)));
        }
    }

    #[test]
    fn sha256_trees_name_32_byte_ids() {
        let mut data = b"100644 a\0".to_vec();
        data.extend_from_slice(&[0x11; 32]);
        data.extend_from_slice(b"40000 b\0");
        data.extend_from_slice(&[0x22; 32]);
        let mut seen = Vec::new();
        fsck_tree_entries(&data, 32, |oid, _| seen.push(oid.to_vec())).unwrap();
        assert_eq!(seen, [vec![0x11; 32], vec![0x22; 32]]);
        // Read at SHA-1's width it is not a tree.
        assert!(fsck_tree(&data, 20).is_err());
    }

    #[test]
    fn tree_rules() {
        assert_eq!(
            fsck_tree(
                &tree(&[("100644", "a"), ("40000", "a.b"), ("100644", "a0")]),
                20
            ),
            Ok(())
        );
        // "a" as a tree sorts as "a/", after "a.b"
        assert_eq!(
            fsck_tree(
                &tree(&[("100644", "a.b"), ("40000", "a"), ("100644", "a0")]),
                20
            ),
            Ok(())
        );
        let err = |t: &[(&str, &str)]| fsck_tree(&tree(t), 20).unwrap_err();
        assert!(err(&[("100644", "b"), ("100644", "a")]).starts_with("treeNotSorted"));
        assert!(err(&[("100644", "a"), ("100644", "a")]).starts_with("duplicateEntries"));
        assert!(err(&[("100644", "a"), ("40000", "a")]).starts_with("duplicateEntries"));
        assert!(err(&[("100645", "a")]).starts_with("badFilemode"));
        assert_eq!(
            fsck_tree(&tree(&[("040000", "a")]), 20),
            Ok(()),
            "zero-padded modes are a warning in git"
        );
        assert!(err(&[("40000", ".git")]).starts_with("hasDotgit"));
        assert!(err(&[("40000", ".GIT")]).starts_with("hasDotgit"));
        assert!(err(&[("100644", "..")]).starts_with("badTree"));
        assert!(err(&[("100644", "")]).starts_with("emptyName"));
        assert!(fsck_tree(b"100644 a\0short", 20).is_err());
        assert!(err(&[("40000", "a"), ("100644", "a")]).starts_with("duplicateEntries"));
        assert!(err(&[("40000", "git~1")]).starts_with("hasDotgit"));
        assert!(err(&[("40000", ".git. .")]).starts_with("hasDotgit"));
        assert!(err(&[("40000", ".g\u{200c}it")]).starts_with("hasDotgit"));
    }

    proptest::proptest! {
        /// The short way past gix-validate (names that cannot break its
        /// rules) answers as gix-validate does, for names made of the
        /// characters that matter.
        #[test]
        fn names_are_judged_as_gix_validate_judges_them(
            name in proptest::collection::vec(
                proptest::sample::select(vec![
                    ".", "g", "G", "i", "I", "t", "T", "~", "1", " ", "a", "\u{200c}", "\u{feff}", "é",
                ]),
                0..7,
            )
        ) {
            let name = name.concat();
            let opts = gix_validate::path::component::Options {
                protect_windows: false,
                protect_hfs: true,
                protect_ntfs: true,
            };
            let full = gix_validate::path::component(name.as_bytes().into(), None, opts).is_ok();
            proptest::prop_assert_eq!(check_name(name.as_bytes(), name.is_ascii()).is_ok(), full, "{:?}", name);
        }

        /// `scan_name` reads eight bytes at a time as a plain loop reads one:
        /// names of any length, with a `/`, a byte above 0x7f or the NUL
        /// at any place (or no NUL).
        #[test]
        fn scan_name_is_the_plain_loop(
            bytes in proptest::collection::vec(
                proptest::sample::select(b"ab/\x00\x7f\x80\xff.".to_vec()),
                0..40,
            )
        ) {
            let plain = bytes.iter().position(|&b| b == 0).map(|nul| {
                let name = &bytes[..nul];
                (nul, name.contains(&b'/'), name.is_ascii())
            });
            proptest::prop_assert_eq!(scan_name(&bytes), plain);
        }

        /// `tree_order` is git's `base_name_compare`: the names compared
        /// bytewise with a tree's followed by `/` (for names without `/`,
        /// the only ones a tree may hold).
        #[test]
        fn tree_order_is_git_base_name_compare(
            a in proptest::collection::vec(proptest::sample::select(b"ab.-0\xff".to_vec()), 0..5),
            b in proptest::collection::vec(proptest::sample::select(b"ab.-0\xff".to_vec()), 0..5),
            a_tree: bool,
            b_tree: bool,
        ) {
            let key = |n: &[u8], tree: bool| [n, if tree { b"/" } else { b"" }].concat();
            let (order, same) = tree_order(&a, a_tree, &b, b_tree);
            proptest::prop_assert_eq!(order, key(&a, a_tree).cmp(&key(&b, b_tree)));
            proptest::prop_assert_eq!(same, a == b);
        }
    }

    #[test]
    fn merge_sorts_and_dedups_what_every_thread_collected() {
        let oid = |b: u8| ObjectId::from_bytes_or_panic(&[b; 20]);
        let mut one = Collected::default();
        let mut two = Collected::default();
        for b in [5u8, 1, 9] {
            one.push_oid(&oid(b), Kind::Blob);
        }
        for b in [9u8, 3] {
            two.push_oid(&oid(b), Kind::Tree);
        }
        two.tag_targets.push((oid(3), oid(1)));
        let merged = merge(vec![two, one]);
        let got: Vec<ObjectId> = merged.oids.iter().map(|e| e.0.to_owned()).collect();
        assert_eq!(got, [1u8, 3, 5, 9].map(oid));
        assert_eq!(merged.tag_targets, [(oid(3), oid(1))]);
        assert!(merge(Vec::new()).oids.is_empty());
    }
}

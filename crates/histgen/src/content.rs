//! File contents: source-like text that grows and changes line by line (so
//! consecutive versions make good deltas), incompressible binary data edited
//! in small places (so versions make binary deltas), and link targets.

use crate::rng::Rng;

/// Text files are kept below this many lines: past it, edits delete lines.
pub(crate) const MAX_LINES: usize = 160;

const WORDS: &[&str] = &[
    "alpha", "buffer", "cache", "delta", "entry", "fanout", "graph", "header", "index", "journal",
    "kernel", "ledger", "marker", "node", "offset", "packet", "queue", "record", "segment",
    "table", "update", "vector", "window", "xref", "yield", "zone", "object", "tree", "blob",
    "commit", "tag", "ref", "state", "store", "upload", "receive", "stream", "chunk", "frame",
];

/// Extensions of text files; `.sh` files are created executable.
pub(crate) const TEXT_EXTS: &[&str] = &["rs", "md", "txt", "c", "py", "toml", "sh"];
/// Extensions of binary files.
pub(crate) const BINARY_EXTS: &[&str] = &["bin", "png", "dat"];

/// Directories files are spread over (`""` is the root). Their names contain
/// no `.`, which keeps them disjoint from file names.
pub(crate) const DIRS: &[&str] = &[
    "",
    "src",
    "src/net",
    "src/net/http",
    "src/util",
    "docs",
    "docs/guide/advanced",
    "assets",
    "assets/img",
    "scripts",
    "lib/core",
    "lib/core/impl",
    "tests/data",
];

/// Whether a path names a text file (by extension).
pub(crate) fn is_text(path: &str) -> bool {
    TEXT_EXTS.iter().any(|e| path.ends_with(&format!(".{e}")))
}

/// Whether bytes look like text (no NUL), as git's own heuristic does.
pub(crate) fn is_text_data(data: &[u8]) -> bool {
    !data.contains(&0)
}

/// One line of source-like text for a file with extension `ext`.
pub(crate) fn line(rng: &mut Rng, ext: &str) -> String {
    let a = rng.pick(WORDS);
    let b = rng.pick(WORDS);
    let c = rng.pick(WORDS);
    let n = rng.below(100_000);
    match ext {
        "rs" | "c" => format!("    let {a}_{b} = {c}({n}, {});", rng.below(64)),
        "py" => format!("    {a}_{b} = {c}({n})"),
        "sh" => format!("echo \"{a} {b} {c}\" >> \"$LOG_{n}\""),
        "toml" => format!("{a}-{b} = \"{c}-{n}\""),
        _ => format!("The {a} {b} keeps every {c} below {n} bytes."),
    }
}

/// A new text file of `lines` lines.
pub(crate) fn new_text(rng: &mut Rng, ext: &str, lines: usize) -> Vec<u8> {
    let mut out = String::new();
    if ext == "sh" {
        out.push_str("#!/bin/sh\nset -eu\n");
    }
    for _ in 0..lines {
        out.push_str(&line(rng, ext));
        out.push('\n');
    }
    out.into_bytes()
}

/// An edit of a text file: a few line inserts, deletes and modifications.
/// Files grow over time, up to [`MAX_LINES`].
pub(crate) fn edit_text(rng: &mut Rng, ext: &str, data: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(data);
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for _ in 0..rng.between(1, 3) {
        let op = if lines.len() > MAX_LINES {
            1
        } else {
            rng.below(4)
        };
        match op {
            0 | 3 => {
                // insert a block
                let at = rng.below(lines.len() + 1);
                let n = rng.between(1, 6);
                for k in 0..n {
                    lines.insert(at + k, line(rng, ext));
                }
            }
            1 if lines.len() > 4 => {
                // delete a run
                let n = rng.between(1, 4).min(lines.len() - 1);
                let at = rng.below(lines.len() - n + 1);
                lines.drain(at..at + n);
            }
            _ if !lines.is_empty() => {
                // modify a line in place
                let at = rng.below(lines.len());
                lines[at] = format!("{} // {}", lines[at], rng.pick(WORDS));
            }
            _ => lines.push(line(rng, ext)),
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    if out.as_bytes() == data {
        // an insert undone by a delete: make sure the edit is an edit
        out.push_str(&line(rng, ext));
        out.push('\n');
    }
    out.into_bytes()
}

/// A resolution of a text conflict: ours, then the lines of theirs that ours
/// does not have (no conflict markers: the merge "chose" this content).
pub(crate) fn combine(ours: &[u8], theirs: &[u8]) -> Vec<u8> {
    let ours_s = String::from_utf8_lossy(ours);
    let theirs_s = String::from_utf8_lossy(theirs);
    let have: std::collections::HashSet<&str> = ours_s.lines().collect();
    let mut out = ours_s.clone().into_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    for l in theirs_s.lines().filter(|l| !have.contains(l)).take(20) {
        out.push_str(l);
        out.push('\n');
    }
    out.into_bytes()
}

/// A new binary file of `len` pseudo-random bytes.
pub(crate) fn new_binary(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rng.fill(&mut v);
    // a NUL early on, so that git (and anyone) sees it as binary
    if let Some(b) = v.get_mut(1) {
        *b = 0;
    }
    v
}

/// A slight edit of binary data: a few bytes overwritten, a small chunk
/// inserted, or a chunk removed. Size stays at most `max_len` (about).
pub(crate) fn edit_binary(rng: &mut Rng, data: &[u8], max_len: usize) -> Vec<u8> {
    let mut v = data.to_vec();
    match rng.below(3) {
        0 if !v.is_empty() => {
            for _ in 0..rng.between(1, 16) {
                let at = rng.below(v.len());
                v[at] = v[at].wrapping_add(1 + rng.below(255) as u8);
            }
        }
        1 if v.len() + 512 <= max_len.max(1024) => {
            let mut chunk = vec![0u8; rng.between(32, 512)];
            rng.fill(&mut chunk);
            let at = rng.below(v.len() + 1);
            v.splice(at..at, chunk);
        }
        _ if v.len() > 64 => {
            let n = rng.between(16, v.len() / 8 + 16).min(v.len() - 32);
            let at = rng.below(v.len() - n + 1);
            v.drain(at..at + n);
        }
        _ => {
            let mut chunk = vec![0u8; 64];
            rng.fill(&mut chunk);
            v.extend_from_slice(&chunk);
        }
    }
    v
}

/// The directory part of a path (`""` for a top-level file).
pub(crate) fn dir_of(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

/// The relative target a symlink at `link` needs to point at `target`.
pub(crate) fn relative_target(link: &str, target: &str) -> String {
    let from: Vec<&str> = dir_of(link).split('/').filter(|s| !s.is_empty()).collect();
    let to: Vec<&str> = target.split('/').collect();
    let common = from
        .iter()
        .zip(&to)
        .take_while(|(a, b)| a == b)
        .count()
        .min(to.len() - 1);
    let mut parts: Vec<&str> = vec![".."; from.len() - common];
    parts.extend_from_slice(&to[common..]);
    parts.join("/")
}

/// A new file path: `dir/word_n.ext`, unique through the counter `n`.
pub(crate) fn new_path(rng: &mut Rng, n: usize, ext: &str) -> String {
    let dir = rng.pick(DIRS);
    let word = rng.pick(WORDS);
    if dir.is_empty() {
        format!("{word}_{n}.{ext}")
    } else {
        format!("{dir}/{word}_{n}.{ext}")
    }
}

/// The extension of a path (after the last `.` of its last component).
pub(crate) fn ext_of(path: &str) -> &str {
    let name = &path[path.rfind('/').map_or(0, |i| i + 1)..];
    name.rfind('.').map_or("", |i| &name[i + 1..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_targets() {
        assert_eq!(relative_target("a.lnk", "b.txt"), "b.txt");
        assert_eq!(relative_target("src/a.lnk", "src/b.txt"), "b.txt");
        assert_eq!(
            relative_target("src/net/a.lnk", "docs/b.txt"),
            "../../docs/b.txt"
        );
        assert_eq!(relative_target("a.lnk", "docs/x/b.txt"), "docs/x/b.txt");
        assert_eq!(relative_target("src/x/a.lnk", "src/b.txt"), "../b.txt");
    }

    #[test]
    fn text_edits_change_and_stay_bounded() {
        let mut rng = Rng::new(3);
        let mut data = new_text(&mut rng, "rs", 10);
        for _ in 0..2000 {
            let next = edit_text(&mut rng, "rs", &data);
            assert_ne!(next, data);
            data = next;
        }
        assert!(String::from_utf8(data.clone()).unwrap().lines().count() <= MAX_LINES + 20);
        assert!(is_text_data(&data));
    }

    #[test]
    fn binary_edits_are_small() {
        let mut rng = Rng::new(4);
        let data = new_binary(&mut rng, 4096);
        assert!(!is_text_data(&data));
        for _ in 0..100 {
            let next = edit_binary(&mut rng, &data, 8192);
            assert!(next.len().abs_diff(data.len()) <= 1024);
        }
    }

    #[test]
    fn extensions() {
        assert_eq!(ext_of("src/a.b/c_1.rs"), "rs");
        assert_eq!(ext_of("latest"), "");
        assert!(is_text("x/y.sh"));
        assert!(!is_text("x/y.png"));
    }
}

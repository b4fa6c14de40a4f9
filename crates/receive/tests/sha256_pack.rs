//! A SHA-256 pack made by real git (`git init --object-format=sha256`,
//! `git pack-objects`), read by pass 1 (`scan`) and resolved by pass 2
//! (`resolve`) in the SHA-256 object format: every object comes out with
//! git's id and kind, OFS_DELTA and REF_DELTA packs alike, the sealed
//! containers are SHA-256 indexes (version 3), and a SHA-256 pack read as
//! SHA-1 is refused (plan 0019, step 4).

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use gitstow_odb::container::ContainerIndex;
use gitstow_odb::staging::ContainerStaging;
use gitstow_odb::ObjectDb;
use gitstow_receive::check;
use gitstow_receive::resolve::{resolve, Counters, ResolveOptions};
use gitstow_receive::scan::{scan, ScanLimits};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_DATE", "1700000000 +0000")
        .env("GIT_COMMITTER_DATE", "1700000000 +0000")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A SHA-256 history with edits (deltas), a rename, a binary and a tag.
fn history(dir: &Path) {
    git(
        dir,
        &["init", "-q", "--object-format=sha256", "-b", "main", "."],
    );
    git(dir, &["config", "user.name", "T"]);
    git(dir, &["config", "user.email", "t@example.com"]);
    let mut text: Vec<String> = (0..300)
        .map(|i| format!("line {i} of the file\n"))
        .collect();
    let mut name = "a.txt";
    for round in 0..8 {
        if round == 4 {
            git(dir, &["mv", name, "c.txt"]);
            name = "c.txt";
        }
        text[round * 30] = format!("edited in round {round}\n");
        std::fs::write(dir.join(name), text.concat()).unwrap();
        let bin: Vec<u8> = (0..4096u32).map(|i| (i * 7 + round as u32) as u8).collect();
        std::fs::write(dir.join("b.bin"), bin).unwrap();
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", &format!("round {round}")]);
    }
    git(dir, &["tag", "-a", "v1", "-m", "v1"]);
}

/// `git pack-objects --all` of the repository, with OFS_DELTAs or REF_DELTAs.
fn pack(dir: &Path, ofs: bool) -> Vec<u8> {
    let mut args = vec!["pack-objects", "--stdout", "--revs", "--all", "-q"];
    if ofs {
        args.push("--delta-base-offset");
    }
    let mut child = Command::new("git")
        .current_dir(dir)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?}");
    out.stdout
}

#[test]
fn a_sha256_pack_from_git_resolves_to_gits_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("r");
    std::fs::create_dir(&repo).unwrap();
    history(&repo);
    let want: BTreeSet<String> = git(
        &repo,
        &[
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objectname) %(objecttype)",
        ],
    )
    .lines()
    .map(str::to_owned)
    .collect();
    assert!(want
        .iter()
        .all(|l| l.split(' ').next().unwrap().len() == 64));
    for ofs in [true, false] {
        let bytes = pack(&repo, ofs);
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        let limits = ScanLimits {
            max_object_bytes: 1 << 30,
            max_objects: 1 << 20,
        };
        let scanned = scan(&file, 0, limits, None, gix_hash::Kind::Sha256).unwrap();
        assert_eq!(scanned.entries.len(), want.len());
        assert!(
            scanned
                .entries
                .iter()
                .any(|e| !matches!(e.kind, gitstow_receive::scan::EntryKind::Base(_))),
            "the pack has deltas"
        );
        let store = Arc::new(gitstow_store::FsStore::new(tmp.path().join("store")).unwrap());
        let db = ObjectDb::new(store, Vec::new());
        let staging_dir = tempfile::tempdir().unwrap();
        let staging = ContainerStaging::new(staging_dir.path(), 1 << 30)
            .expecting(scanned.entries.len() as u64);
        let opts = ResolveOptions {
            threads: 2,
            max_object_bytes: 1 << 30,
            max_stored_depth: 50,
            max_chain_depth: 4000,
            max_held_bytes: 64 << 20,
        };
        let resolved = resolve(&file, &scanned, &db, &staging, opts, &Counters::default()).unwrap();
        let references = resolved.references;
        let merged = check::merge(resolved.collected);
        let got: BTreeSet<String> = merged
            .oids
            .iter()
            .map(|(oid, kind)| format!("{oid} {kind}"))
            .collect();
        assert_eq!(got, want, "ofs: {ofs}");
        // Every object a pushed one names is in the pack (a closed history).
        for r in references.iter() {
            assert!(merged.oids.find(r).is_some(), "{r}");
        }
        // Sealed as SHA-256 containers holding every object.
        let sealed = staging.finish().unwrap();
        let stored: usize = sealed
            .iter()
            .map(|c| {
                let idx = ContainerIndex::decode(&c.index).unwrap();
                assert_eq!(idx.oid_width(), 32);
                idx.len()
            })
            .sum();
        assert_eq!(stored, want.len());
        // The same pack read as SHA-1 is refused (its trailer is SHA-256).
        assert!(scan(&file, 0, limits, None, gix_hash::Kind::Sha1).is_err());
    }
}

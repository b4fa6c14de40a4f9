//! Fetches answered as canonical git answers them: the same fetch, made by
//! the real `git` client against `gitstow serve` and against canonical
//! `git upload-pack` (what `git http-backend` runs) serving the same refs
//! from a repository at git's best (`repack -adb`, `commit-graph write
//! --reachable`), brings the client the same objects (modulo deltas): for
//! incremental fetches, fetches from far behind, fetches after a force push
//! and a branch deletion, an octopus merge, shallow clones and fetches,
//! filtered clones, and mirror clones of a repository whose refs moved since
//! its last GC. gitstow's side holds a GC (closure, bitmaps) and pushes made
//! after it, as a repository in service does.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::*;

/// The objects a repository holds (packed or loose).
fn objects(repo: &Path) -> BTreeSet<String> {
    git_out(
        repo,
        &[
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objectname)",
        ],
    )
    .lines()
    .map(str::to_owned)
    .collect()
}

/// The refs of a repository (`for-each-ref`: in a partial clone, anything
/// listing objects would fetch the missing ones from the server).
fn refs(repo: &Path) -> String {
    git_out(
        repo,
        &[
            "for-each-ref",
            "--format=%(objectname) %(objecttype) %(refname)",
        ],
    )
}

/// The same repository served twice: by gitstow at `url` and by canonical
/// git from `canon` (a bare repository), both updated from `src`.
struct Twin {
    server: Server,
    tmp: tempfile::TempDir,
    src: PathBuf,
    url: String,
    canon: PathBuf,
}

impl Twin {
    /// A generated history of 300 commits (4 branches, merges, tags,
    /// renames, binaries) on both sides; gitstow's GC runs with `main` 10
    /// first-parent commits back, which are pushed after it.
    fn new(name: &str) -> Twin {
        Twin::start(name, true)
    }

    /// As [`Twin::new`] on a server with its automatic maintenance and no
    /// GC: the push of `main` 10 first-parent commits back is the import
    /// (its closure gets bitmaps from the first maintenance pass, awaited
    /// here), the 10 commits are pushed after it.
    fn imported(name: &str) -> Twin {
        Twin::start(name, false)
    }

    fn start(name: &str, gc: bool) -> Twin {
        let server = if gc {
            Server::start_with(&["--no-maintenance"])
        } else {
            Server::start_with(&[])
        };
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src.git");
        histgen(
            &src,
            &gitstow_histgen::Options {
                seed: 57,
                commits: 300,
                ..Default::default()
            },
        );
        let url = server.url(name);
        let canon = tmp.path().join("canon.git");
        git(
            tmp.path(),
            &["init", "--quiet", "--bare", canon.to_str().unwrap()],
        );
        // A server that does not allow `sparse:oid` (it reads a
        // sparse-checkout spec from a blob), as gitstow does not.
        for (k, v) in [
            ("uploadpack.allowFilter", "true"),
            ("uploadpackfilter.sparse:oid.allow", "false"),
            ("gc.auto", "0"),
        ] {
            git(&canon, &["config", k, v]);
        }
        let twin = Twin {
            server,
            tmp,
            src,
            url,
            canon,
        };
        let tip = twin.rev("main");
        git(
            &twin.src,
            &["update-ref", "refs/heads/main", &twin.rev("main~10")],
        );
        twin.publish();
        if gc {
            assert_maintained(
                &twin
                    .server
                    .store()
                    .maintain(&["--repo", name, "--gc", "--grace", "0"], &[]),
            );
        } else {
            await_closure_bitmaps(&twin.server, name);
        }
        git(&twin.src, &["update-ref", "refs/heads/main", &tip]);
        twin.publish();
        twin
    }

    /// How gitstow found the objects of its last fetch (`via` of its log line).
    fn via(&self) -> String {
        log_text(&last_pack_line(&self.server.logs()), "via")
    }

    fn rev(&self, rev: &str) -> String {
        git_out(&self.src, &["rev-parse", rev])
    }

    /// Mirrors `src`'s refs to both sides; canonical git then repacks with
    /// bitmaps and writes its commit-graph.
    fn publish(&self) {
        git(&self.src, &["push", "--quiet", "--mirror", &self.url]);
        git(
            &self.src,
            &["push", "--quiet", "--mirror", self.canon.to_str().unwrap()],
        );
        git(&self.canon, &["repack", "-adbq"]);
        git(&self.canon, &["commit-graph", "write", "--reachable"]);
    }

    /// Canonical git's URL (`file://`: its upload-pack, as http-backend runs it).
    fn canon_url(&self) -> String {
        format!("file://{}", self.canon.display())
    }

    /// Two bare clients (gitstow's, canonical's) holding `refs` of `src` at
    /// the given revisions and only what those reach.
    fn clients(&self, label: &str, refs: &[(&str, &str)]) -> [PathBuf; 2] {
        ["gitstow", "canonical"].map(|side| {
            let dir = self.tmp.path().join(format!("{label}-{side}.git"));
            git(
                self.tmp.path(),
                &["init", "--quiet", "--bare", dir.to_str().unwrap()],
            );
            git(&dir, &["config", "fetch.unpackLimit", "1"]);
            let specs: Vec<String> = refs
                .iter()
                .map(|(name, rev)| format!("{}:{name}", self.rev(rev)))
                .collect();
            let mut args = vec!["fetch", "--quiet", self.src.to_str().unwrap()];
            args.extend(specs.iter().map(String::as_str));
            git(&dir, &args);
            dir
        })
    }

    /// Two bare partial clones (`--filter=<filter>`, gitstow's and
    /// canonical's) holding `main` at `rev` and what their filter let
    /// through, their `origin` (the promisor remote) the side they stand
    /// for: [`Twin::fetch_origin_same`] fetches with the clone's filter.
    fn partial_clients(&self, label: &str, rev: &str, filter: &str) -> [PathBuf; 2] {
        let [behind, _] = self.clients(&format!("{label}-src"), &[("refs/heads/main", rev)]);
        let behind = format!("file://{}", behind.display());
        let urls = [self.url.clone(), self.canon_url()];
        ["gitstow", "canonical"]
            .iter()
            .zip(urls)
            .map(|(side, url)| {
                let dir = self.tmp.path().join(format!("{label}-{side}.git"));
                git(
                    self.tmp.path(),
                    &[
                        "-c",
                        "uploadpack.allowFilter=true",
                        "clone",
                        "--quiet",
                        "--bare",
                        &format!("--filter={filter}"),
                        &behind,
                        dir.to_str().unwrap(),
                    ],
                );
                git(&dir, &["remote", "set-url", "origin", &url]);
                dir
            })
            .collect::<Vec<_>>()
            .try_into()
            .unwrap()
    }

    /// `git fetch --quiet origin` in each client (the side it stands for):
    /// both received the same objects; returns them.
    fn fetch_origin_same(&self, clients: &[PathBuf; 2]) -> BTreeSet<String> {
        let got = clients.clone().map(|client| {
            let before = objects(&client);
            git(&client, &["fetch", "--quiet", "origin"]);
            fsck(&client);
            objects(&client)
                .difference(&before)
                .cloned()
                .collect::<BTreeSet<_>>()
        });
        assert_same("fetch from origin", &got[0], &got[1]);
        got[0].clone()
    }

    /// Runs `git <args> <url> <rest>` in each client, against gitstow and
    /// against canonical git, and asserts both received the same objects;
    /// returns them.
    fn fetch_same(&self, clients: &[PathBuf; 2], args: &[&str], rest: &[&str]) -> BTreeSet<String> {
        let urls = [self.url.clone(), self.canon_url()];
        let mut got = Vec::new();
        for (client, url) in clients.iter().zip(&urls) {
            let before = objects(client);
            let mut all: Vec<&str> = args.to_vec();
            all.push(url);
            all.extend(rest);
            git(client, &all);
            fsck(client);
            got.push(
                objects(client)
                    .difference(&before)
                    .cloned()
                    .collect::<BTreeSet<_>>(),
            );
        }
        assert_same("fetch", &got[0], &got[1]);
        assert_eq!(refs(&clients[0]), refs(&clients[1]), "refs after the fetch");
        got.swap_remove(0)
    }

    /// `git clone <args>` of both sides into fresh directories; asserts they
    /// hold the same objects and refs and returns the objects.
    fn clone_same(&self, label: &str, args: &[&str]) -> BTreeSet<String> {
        let urls = [self.url.clone(), self.canon_url()];
        let mut got = Vec::new();
        let mut refs_seen = Vec::new();
        for (side, url) in ["gitstow", "canonical"].iter().zip(&urls) {
            let dir = format!("{label}-{side}.git");
            let mut all = vec!["clone", "--quiet"];
            all.extend(args);
            all.push(url);
            all.push(&dir);
            git(self.tmp.path(), &all);
            let dir = self.tmp.path().join(&dir);
            fsck(&dir);
            got.push(objects(&dir));
            refs_seen.push(refs(&dir));
        }
        assert_same(label, &got[0], &got[1]);
        assert_eq!(refs_seen[0], refs_seen[1], "{label}: refs");
        got.swap_remove(0)
    }
}

fn assert_same(what: &str, gitstow: &BTreeSet<String>, canonical: &BTreeSet<String>) {
    let extra: Vec<_> = gitstow.difference(canonical).collect();
    let missing: Vec<_> = canonical.difference(gitstow).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "{what}: gitstow sent {} objects, canonical git {}; only gitstow's: {extra:?}; only canonical's: {missing:?}",
        gitstow.len(),
        canonical.len()
    );
}

/// Incremental fetches (a few commits, with the tags they bring) and a
/// fetch from half the history behind, in protocol v2 and v0.
#[test]
fn incremental_and_far_behind_fetches_bring_what_git_brings() {
    let twin = Twin::new("incremental");
    let n: usize = git_out(
        &twin.src,
        &["rev-list", "--first-parent", "--count", "main"],
    )
    .parse()
    .unwrap();
    for (label, back) in [
        ("near", "main~3".to_owned()),
        ("far", format!("main~{}", n / 2)),
    ] {
        for version in ["2", "0"] {
            let clients = twin.clients(
                &format!("{label}-v{version}"),
                &[("refs/heads/main", &back)],
            );
            let got = twin.fetch_same(
                &clients,
                &[
                    "-c",
                    &format!("protocol.version={version}"),
                    "fetch",
                    "--quiet",
                    "--tags",
                ],
                &["+refs/heads/*:refs/heads/*"],
            );
            assert!(!got.is_empty(), "{label} v{version}: nothing fetched");
        }
    }
}

/// After `main` is rewritten (force push of a new commit on an older one)
/// and a branch deleted, a client at the old `main` fetches with `--prune`;
/// then an octopus merge of every branch is pushed and fetched.
#[test]
fn fetches_after_a_force_push_a_deletion_and_an_octopus_merge_bring_what_git_brings() {
    let twin = Twin::new("rewritten");
    let old_main = twin.rev("main");
    let branches: Vec<String> = git_out(
        &twin.src,
        &["for-each-ref", "--format=%(refname)", "refs/heads/"],
    )
    .lines()
    .map(str::to_owned)
    .collect();
    assert!(branches.len() >= 3, "{branches:?}");
    let mut refs: Vec<(&str, &str)> = branches.iter().map(|b| (b.as_str(), b.as_str())).collect();
    refs.retain(|(b, _)| *b != "refs/heads/main");
    refs.push(("refs/heads/main", "main"));
    let clients = twin.clients("rewritten", &refs);

    // Rewrite main: a new commit on main~7 (its tree that of main~7 with
    // a changed file), and delete another branch.
    let base = twin.rev("main~7");
    let tree = git_out(&twin.src, &["rev-parse", &format!("{base}^{{tree}}")]);
    let rewritten = git_out(
        &twin.src,
        &["commit-tree", &tree, "-p", &base, "-m", "rewritten main"],
    );
    git(&twin.src, &["update-ref", "refs/heads/main", &rewritten]);
    let deleted = branches.iter().find(|b| *b != "refs/heads/main").unwrap();
    git(&twin.src, &["update-ref", "-d", deleted]);
    twin.publish();
    assert_ne!(twin.rev("main"), old_main);
    twin.fetch_same(
        &clients,
        &["fetch", "--quiet", "--prune"],
        &["+refs/heads/*:refs/heads/*"],
    );
    for c in &clients {
        let still = git_cmd(c)
            .args(["rev-parse", "--verify", "--quiet", deleted])
            .output()
            .unwrap();
        assert!(!still.status.success(), "{deleted} was not pruned");
    }

    // An octopus merge of every branch left.
    let heads: Vec<String> = git_out(
        &twin.src,
        &["for-each-ref", "--format=%(objectname)", "refs/heads/"],
    )
    .lines()
    .map(str::to_owned)
    .collect();
    let mut args = vec![
        "commit-tree".to_owned(),
        format!("{}^{{tree}}", twin.rev("main")),
    ];
    for h in &heads {
        args.push("-p".into());
        args.push(h.clone());
    }
    args.extend(["-m".into(), "octopus".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let octopus = git_out(&twin.src, &args);
    assert!(heads.len() >= 3, "an octopus of {} parents", heads.len());
    git(&twin.src, &["update-ref", "refs/heads/main", &octopus]);
    twin.publish();
    let got = twin.fetch_same(
        &clients,
        &["fetch", "--quiet"],
        &["+refs/heads/*:refs/heads/*"],
    );
    assert!(got.contains(&octopus), "the octopus merge was fetched");
}

/// Shallow clones (`--depth`, `--shallow-since`), a deepening fetch,
/// filtered clones (`blob:none`, `tree:0`, `blob:limit`, `object:type=`,
/// `combine:`; `sparse:oid=` refused in git's words) and a mirror clone
/// of a repository whose refs moved since its GC.
#[test]
fn shallow_filtered_and_mirror_clones_bring_what_git_brings() {
    let twin = Twin::new("clones");
    let all = twin.clone_same("mirror", &["--mirror"]);
    assert_eq!(all, objects(&twin.src), "a mirror clone holds everything");
    let depth = twin.clone_same("depth", &["--bare", "--depth", "3", "--no-single-branch"]);
    let since = git_out(&twin.src, &["log", "-1", "--format=%ct", "main~20"]);
    let shallow_since = twin.clone_same(
        "since",
        &["--bare", "--shallow-since", &since, "--branch", "main"],
    );
    let mut partial = Vec::new();
    for filter in [
        "blob:none",
        "tree:0",
        "blob:limit=2k",
        "object:type=blob",
        "object:type=tree",
        "object:type=commit",
        "combine:blob:none+tree:2",
        "combine:tree:3+blob:limit=1k",
        "combine:object:type=tree+tree:1",
    ] {
        partial.push(twin.clone_same(
            &format!("filter-{}", filter.replace([':', '=', '+'], "-")),
            &["--bare", &format!("--filter={filter}")],
        ));
    }
    // Each was honoured (by canonical git too), not answered with everything.
    for (i, got) in [&depth, &shallow_since]
        .into_iter()
        .chain(&partial)
        .enumerate()
    {
        assert!(
            !got.is_empty() && got.len() < all.len(),
            "clone {i}: {} of {}",
            got.len(),
            all.len()
        );
    }

    // `sparse:oid=` refused by both, in the same words.
    for (side, url) in [
        ("gitstow", twin.url.clone()),
        ("canonical", twin.canon_url()),
    ] {
        let out = git_fail(
            twin.tmp.path(),
            &[
                "clone",
                "--bare",
                "--filter=sparse:oid=main:README",
                &url,
                &format!("sparse-{side}.git"),
            ],
        );
        assert!(
            out.contains("remote error: filter 'sparse:oid' not supported"),
            "{side}: {out}"
        );
    }

    // Deepening the depth-3 clones by 5.
    let clients = [
        twin.tmp.path().join("depth-gitstow.git"),
        twin.tmp.path().join("depth-canonical.git"),
    ];
    let got = twin.fetch_same(
        &clients,
        &["fetch", "--quiet", "--deepen", "5"],
        &["+refs/heads/*:refs/heads/*"],
    );
    assert!(!got.is_empty(), "deepening fetched nothing");
}

/// A repository that never had a GC, as one imported by a push and pushed
/// to since (automatic maintenance only): single-branch clones read the
/// bitmaps the first maintenance pass wrote over the import's closure, and
/// so does a mirror clone, a fetch from behind reads the have side from the
/// bitmaps, clones and a partial clone's fetch under filters decided by
/// kind and size read the bitmaps too (a `tree:<depth>` filter walks);
/// every one brings what canonical git brings. The same single-branch
/// clones after a GC.
#[test]
fn clones_between_gcs_bring_what_git_brings() {
    let twin = Twin::imported("imported");
    let other = git_out(
        &twin.src,
        &["for-each-ref", "--format=%(refname:short)", "refs/heads/"],
    )
    .lines()
    .find(|b| *b != "main")
    .expect("a second branch")
    .to_owned();
    let all = twin.clone_same("mirror", &["--mirror"]);
    // The import's closure names every ref it created, some of them behind
    // tags on later commits: the clone's walk meets those first and cannot
    // tell the closure is reached whole, so the bitmaps answer it.
    assert_eq!(twin.via(), "bitmaps");
    assert_eq!(all, objects(&twin.src));
    for (label, branch) in [("single-main", "main"), ("single-other", other.as_str())] {
        let got = twin.clone_same(
            label,
            &["--bare", "--single-branch", "--no-tags", "--branch", branch],
        );
        assert_eq!(twin.via(), "bitmaps", "{label}");
        assert!(!got.is_empty() && got.len() < all.len(), "{label}");
    }
    twin.clone_same(
        "single-tags",
        &["--bare", "--single-branch", "--branch", "main"],
    );
    assert_eq!(twin.via(), "bitmaps");
    // Filters decided by kind and size apply to the bitmaps' answer; a
    // `tree:<depth>` above 0 needs the paths of the walk.
    for (label, args, via) in [
        ("blob-none", vec!["--bare", "--filter=blob:none"], "bitmaps"),
        (
            "blob-none-single",
            vec!["--bare", "--filter=blob:none", "--single-branch"],
            "bitmaps",
        ),
        ("tree-0", vec!["--bare", "--filter=tree:0"], "bitmaps"),
        (
            "blob-limit",
            vec!["--bare", "--filter=blob:limit=2k"],
            "bitmaps",
        ),
        (
            "type-commit",
            vec!["--bare", "--filter=object:type=commit"],
            "bitmaps",
        ),
        (
            "type-blob",
            vec!["--bare", "--filter=object:type=blob", "--single-branch"],
            "bitmaps",
        ),
        (
            "combine-depth",
            vec!["--bare", "--filter=combine:blob:none+tree:2"],
            "walk",
        ),
    ] {
        let got = twin.clone_same(label, &args);
        assert_eq!(twin.via(), via, "{label}");
        assert!(!got.is_empty() && got.len() < all.len(), "{label}");
    }
    // A partial clone from behind fetches with its filter and its haves:
    // the have side from the bitmaps, the filter on what is sent.
    let partial = twin.partial_clients("partial-behind", "main~15", "blob:none");
    let got = twin.fetch_origin_same(&partial);
    assert_eq!(twin.via(), "bitmaps");
    assert!(!got.is_empty(), "the partial clone fetched nothing");
    let clients = twin.clients("behind", &[("refs/heads/main", "main~15")]);
    twin.fetch_same(
        &clients,
        &["fetch", "--quiet"],
        &["+refs/heads/*:refs/heads/*"],
    );
    assert_eq!(twin.via(), "bitmaps");

    let gcd = Twin::new("collected");
    gcd.clone_same(
        "gc-single",
        &["--bare", "--single-branch", "--branch", "main"],
    );
    assert_eq!(gcd.via(), "bitmaps");
}

//! The crate graph keeps the layers of `docs/design.md` and the design of
//! record: the two transports (`gitstow-http`, `gitstow-ssh`)
//! are siblings over `gitstow-service`; neither imports the other, and
//! neither reaches an engine crate (`receive`, `upload`, `odb`, `maintain`,
//! `hooks`) or the access decisions (`access`) except through `service`.
//! The engines never reach up into the service or a transport.
//!
//! Edges that break a rule today are listed in [`DEBTS`], each with the
//! step of plan 0015 that removes it: the test fails on any other edge, and
//! on a debt that is gone (so the list only shrinks).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// The workspace's crates and what each depends on (normal dependencies
/// among workspace crates), from `cargo metadata`.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let names: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null()) // normal, not dev or build
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .filter(|d| names.contains(d))
                .collect();
            (p["name"].as_str().unwrap().to_owned(), deps)
        })
        .collect()
}

const TRANSPORTS: &[&str] = &["gitstow-http", "gitstow-ssh"];
const ENGINES: &[&str] = &[
    "gitstow-receive",
    "gitstow-upload",
    "gitstow-odb",
    "gitstow-maintain",
    "gitstow-hooks",
];

/// Edges that break a rule today, and the step of plan 0015 that removes
/// each (none since step 3: the list stays, so that a debt taken on later
/// is named with the step that pays it).
const DEBTS: &[(&str, &str, &str)] = &[];

#[test]
fn transports_are_siblings_over_the_service_and_engines_never_reach_up() {
    let g = graph();
    assert!(g.contains_key("gitstow-service") && g.contains_key("gitstow-ssh"));
    let mut broken = BTreeSet::new();
    for (from, deps) in &g {
        for to in deps {
            let rule = if TRANSPORTS.contains(&from.as_str()) && TRANSPORTS.contains(&to.as_str()) {
                Some("a transport imports the other")
            } else if TRANSPORTS.contains(&from.as_str()) && ENGINES.contains(&to.as_str()) {
                Some("a transport reaches an engine crate, not through service")
            } else if TRANSPORTS.contains(&from.as_str()) && to == "gitstow-access" {
                Some("a transport decides access itself, not through service's gate")
            } else if ENGINES.contains(&from.as_str())
                && (to == "gitstow-service" || TRANSPORTS.contains(&to.as_str()))
            {
                Some("an engine crate reaches up")
            } else {
                None
            };
            if let Some(rule) = rule {
                broken.insert((from.clone(), to.clone(), rule));
            }
        }
    }
    let new: Vec<_> = broken
        .iter()
        .filter(|(f, t, _)| !DEBTS.iter().any(|(a, b, _)| a == f && b == t))
        .collect();
    assert!(new.is_empty(), "edges that break the layers: {new:?}");
    let paid: Vec<_> = DEBTS
        .iter()
        .filter(|(a, b, _)| !broken.iter().any(|(f, t, _)| a == f && b == t))
        .collect();
    assert!(
        paid.is_empty(),
        "debts no longer in the graph (remove them from DEBTS): {paid:?}"
    );
}

/// Whether Rust source `text` uses `unsafe` (a block, fn, impl or trait),
/// not counting comments.
fn uses_unsafe(text: &str) -> bool {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .any(|code| {
            [
                "unsafe {",
                "unsafe fn",
                "unsafe impl",
                "unsafe extern",
                "unsafe trait",
            ]
            .iter()
            .any(|u| code.contains(u))
        })
}

/// Every `.rs` file under `dir`.
fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn a_crate_without_unsafe_code_forbids_it() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let src = entry.unwrap().path().join("src");
        let lib = src.join("lib.rs");
        if !lib.exists() {
            continue;
        }
        let mut files = Vec::new();
        sources(&src, &mut files);
        let any = files
            .iter()
            .any(|f| uses_unsafe(&std::fs::read_to_string(f).unwrap()));
        if !any {
            let text = std::fs::read_to_string(&lib).unwrap();
            assert!(
                text.contains("#![forbid(unsafe_code)]"),
                "{} has no unsafe code: it should say #![forbid(unsafe_code)]",
                lib.display()
            );
            checked += 1;
        }
    }
    assert!(checked >= 9, "{checked} crates without unsafe code");
}

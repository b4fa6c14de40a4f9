//! The documentation cannot drift from the program: the flag reference in
//! `docs/serve.md` names exactly the flags `gitstow serve --help` names, the
//! README stays a page, and every page it links exists.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// The `--flags` in `text` where `keep` accepts the line.
fn flags(text: &str, keep: impl Fn(&str) -> bool) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines().filter(|l| keep(l)) {
        let mut rest = line;
        while let Some(at) = rest.find("--") {
            let name: String = rest[at + 2..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
                .collect();
            if !name.is_empty() {
                out.insert(format!("--{name}"));
            }
            rest = &rest[at + 2 + name.len()..];
        }
    }
    out
}

#[test]
fn the_flag_reference_names_every_flag_of_serve_and_no_other() {
    let help = Command::new(env!("CARGO_BIN_EXE_gitstow"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
    let help = String::from_utf8(help.stdout).unwrap();
    // The option lines: indented, starting with the flag (or `-x, --flag`).
    let mut given = flags(&help, |l| {
        let t = l.trim_start();
        l.starts_with("  ") && (t.starts_with("--") || (t.starts_with('-') && t.contains(", --")))
    });
    given.remove("--help");
    given.remove("--version");
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/serve.md"))
        .unwrap();
    // The table's rows: the first cell names the flags.
    let documented = flags(&page, |l| l.starts_with("| `--"))
        .into_iter()
        .filter(|f| {
            page.lines().filter(|l| l.starts_with("| `--")).any(|l| {
                l.split('|')
                    .nth(1)
                    .is_some_and(|cell| cell.contains(f.as_str()))
            })
        })
        .collect::<BTreeSet<_>>();
    let missing: Vec<_> = given.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&given).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "flags of `serve --help` missing from docs/serve.md's table: {missing:?}; in the table but not in --help: {unknown:?}"
    );
    assert!(
        given.len() > 40,
        "only {} flags read from --help",
        given.len()
    );
}

#[test]
fn the_readme_is_a_page_and_its_links_lead_somewhere() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines < 200, "README.md has {lines} lines");
    let mut linked = 0;
    for part in readme.split("](").skip(1) {
        let target = part.split(')').next().unwrap();
        if target.starts_with("http") {
            continue;
        }
        let path = target.split('#').next().unwrap();
        assert!(
            root.join(path).exists(),
            "README links to {target}, which does not exist"
        );
        linked += 1;
    }
    for page in ["serve", "access", "lfs", "operations", "deployment", "s3"] {
        assert!(
            readme.contains(&format!("(docs/{page}.md)")),
            "README does not link docs/{page}.md"
        );
    }
    assert!(linked >= 6, "{linked} links");
}

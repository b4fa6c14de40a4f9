//! `gitstow key add/list/remove` with keys made by the real `ssh-keygen`
//! (OpenSSH's client, installed by `.ci/run`): fingerprints as `ssh-keygen
//! -lf` prints them, the key types accepted and refused, a key bound to one
//! existing token, keys going with a revoked token, and what a second
//! reader of the store sees (`GITSTOW_TEST_STORE=s3` runs it on S3).

mod common;

use std::path::{Path, PathBuf};

use common::*;

/// `ssh-keygen -t KIND [-b BITS]` into `dir/name`; returns the `.pub` path.
fn keygen(dir: &Path, name: &str, kind: &str, bits: Option<&str>) -> PathBuf {
    ssh_keygen(dir, name, kind, bits).with_extension("pub")
}

fn text(out: &std::process::Output) -> (bool, String, String) {
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn keys_are_added_listed_and_removed_by_openssh_fingerprint() {
    let tmp = tempfile::tempdir().unwrap();
    let store = TestStore::from_env(tmp.path());
    store.create_token("ci", &["org/*:write"], &[]);
    store.create_token("reader", &["*:read"], &[]);
    let ed = keygen(tmp.path(), "ed", "ed25519", None);
    let ec = keygen(tmp.path(), "ec", "ecdsa", Some("384"));
    let rsa = keygen(tmp.path(), "rsa", "rsa", Some("3072"));

    for (key, token, alg) in [
        (&ed, "ci", "ssh-ed25519"),
        (&ec, "ci", "ecdsa-sha2-nistp384"),
        (&rsa, "reader", "ssh-rsa"),
    ] {
        let (ok, out, err) =
            text(&store.admin(&["key", "add", "--token", token, key.to_str().unwrap()]));
        assert!(ok, "key add {alg}: {out}{err}");
        let fp = openssh_fingerprint(key);
        assert_eq!(
            out.trim(),
            format!("added key {fp} ({alg}) to token '{token}'")
        );
    }

    // listed as FINGERPRINT TOKEN TITLE under a header, by a fresh reader
    // of the store, and as JSON
    let (ok, out, _) = text(&store.admin(&["key", "list"]));
    assert!(ok);
    let want = [
        (openssh_fingerprint(&ed), "ci", "ed@test"),
        (openssh_fingerprint(&ec), "ci", "ec@test"),
        (openssh_fingerprint(&rsa), "reader", "rsa@test"),
    ];
    let table: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(table[0], ["FINGERPRINT", "TOKEN", "TITLE"], "{out}");
    let rows: Vec<(String, &str, &str)> = table[1..]
        .iter()
        .map(|r| (r[0].to_owned(), r[1], r[2]))
        .collect();
    assert_eq!(rows, want);
    assert_eq!(
        listed_keys(&store, &[]),
        want.map(|(f, t, c)| (f, t.to_owned(), c.to_owned(), alg_of(c)))
    );
    assert_eq!(
        listed_keys(&store, &["--token", "reader"]),
        [(
            openssh_fingerprint(&rsa),
            "reader".to_owned(),
            "rsa@test".to_owned(),
            "ssh-rsa".to_owned()
        )]
    );
    let (ok, _, err) = text(&store.admin(&["key", "list", "--token", "nobody"]));
    assert!(!ok && err.contains("no token named \"nobody\""), "{err}");

    // one key, one token
    let (ok, _, err) =
        text(&store.admin(&["key", "add", "--token", "reader", ed.to_str().unwrap()]));
    assert!(!ok, "a key given twice");
    assert!(err.contains("belongs to token \"ci\" already"), "{err}");
    let (ok, _, err) =
        text(&store.admin(&["key", "add", "--token", "nobody", ed.to_str().unwrap()]));
    assert!(!ok && err.contains("no token named"), "{err}");

    // removed by fingerprint; a second removal says there is none
    let fp = openssh_fingerprint(&ec);
    let (ok, out, _) = text(&store.admin(&["key", "remove", &fp]));
    assert!(ok);
    assert_eq!(out.trim(), format!("removed key {fp} of token 'ci'"));
    let (ok, _, err) = text(&store.admin(&["key", "remove", &fp]));
    assert!(!ok && err.contains("no key has fingerprint"), "{err}");

    // revoking a token removes its keys; a new token of the same name has none
    let (ok, _, _) = text(&store.admin(&["token", "revoke", "ci"]));
    assert!(ok);
    store.create_token("ci", &["*:admin"], &[]);
    assert_eq!(
        listed_keys(&store, &[]),
        [(
            openssh_fingerprint(&rsa),
            "reader".to_owned(),
            "rsa@test".to_owned(),
            "ssh-rsa".to_owned()
        )]
    );
    // `access show` lists the keys too
    let (_, out, _) = text(&store.admin(&["access", "show"]));
    assert!(
        out.contains(&format!(
            "ssh key {} of reader: rsa@test",
            openssh_fingerprint(&rsa)
        )),
        "{out}"
    );
}

#[test]
fn weak_and_unknown_keys_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let store = TestStore::from_env(tmp.path());
    store.create_token("ci", &["*:write"], &[]);
    let weak = keygen(tmp.path(), "weak", "rsa", Some("1024"));
    let ed = keygen(tmp.path(), "ed", "ed25519", None);
    let private = ed.with_extension("");
    let garbage = tmp.path().join("garbage.pub");
    std::fs::write(&garbage, "ssh-ed25519 not-base64 x\n").unwrap();
    for (file, says) in [
        (weak.to_str().unwrap(), "1024 bits is too weak"),
        (private.to_str().unwrap(), "that is a private key"),
        (garbage.to_str().unwrap(), "not an OpenSSH public key line"),
        ("/nonexistent/key.pub", "cannot read /nonexistent/key.pub"),
    ] {
        let (ok, out, err) = text(&store.admin(&["key", "add", "--token", "ci", file]));
        assert!(!ok, "{file} accepted: {out}");
        assert!(err.contains(says), "{file}: {err}");
    }
    let (_, out, _) = text(&store.admin(&["key", "list"]));
    assert_eq!(out, "no keys\n", "nothing was added");
    assert!(listed_keys(&store, &[]).is_empty());
}

/// `key list --json` parsed: (fingerprint, token, title, algorithm) per key.
fn listed_keys(store: &TestStore, args: &[&str]) -> Vec<(String, String, String, String)> {
    let mut argv = vec!["key", "list", "--json"];
    argv.extend_from_slice(args);
    let (ok, out, err) = text(&store.admin(&argv));
    assert!(ok, "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).expect("key list --json is JSON");
    rows.iter()
        .map(|r| {
            let added = r["added"].as_str().expect("added");
            assert!(
                added.ends_with('Z') && added.len() == 20,
                "RFC 3339: {added}"
            );
            let field = |k: &str| {
                r[k].as_str()
                    .unwrap_or_else(|| panic!("{k} in {r}"))
                    .to_owned()
            };
            (
                field("fingerprint"),
                field("token"),
                field("title"),
                field("algorithm"),
            )
        })
        .collect()
}

/// The algorithm `ssh-keygen` names for the keys the test makes, by title.
fn alg_of(title: &str) -> String {
    match title {
        "ed@test" => "ssh-ed25519",
        "ec@test" => "ecdsa-sha2-nistp384",
        _ => "ssh-rsa",
    }
    .to_owned()
}

//! The AWS credential chain with the real S3 server: no keys on the command
//! line or in `AWS_ACCESS_KEY_ID`, but a profile in the shared credentials
//! file named by `AWS_PROFILE` (and its region in the shared config file):
//! pushes and clones work; a profile that does not exist fails at start,
//! saying so. Needs the S3 server of the other S3 tests (`S3_ENDPOINT`…;
//! `./scripts/test` starts one) and fails without it.

mod common;

use common::*;

/// A fresh S3 test store without its key flags (and region).
fn store_without_keys() -> (TestStore, String, String) {
    let TestStore::S3 { url, flags } = TestStore::s3() else {
        unreachable!()
    };
    let mut kept = Vec::new();
    let (mut key, mut secret) = (String::new(), String::new());
    let mut it = flags.into_iter();
    while let Some(f) = it.next() {
        match f.as_str() {
            "--s3-access-key" => key = it.next().unwrap(),
            "--s3-secret-key" => secret = it.next().unwrap(),
            "--s3-region" => {
                it.next();
            }
            _ => kept.push(f),
        }
    }
    (TestStore::S3 { url, flags: kept }, key, secret)
}

#[test]
fn credentials_and_region_come_from_a_profile() {
    let (store, key, secret) = store_without_keys();
    let tmp = tempfile::tempdir().unwrap();
    let credentials = tmp.path().join("credentials");
    let config = tmp.path().join("config");
    std::fs::write(
        &credentials,
        format!("[gitstow-test]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n"),
    )
    .unwrap();
    let region = std::env::var("S3_REGION").unwrap_or_else(|_| "us-east-1".into());
    std::fs::write(
        &config,
        format!("[profile gitstow-test]\nregion = {region}\n"),
    )
    .unwrap();
    let env = [
        ("AWS_SHARED_CREDENTIALS_FILE", credentials.to_str().unwrap()),
        ("AWS_CONFIG_FILE", config.to_str().unwrap()),
        ("AWS_PROFILE", "gitstow-test"),
    ];
    let server = Server::start_on(Some(&store), &["--no-maintenance"], &env);
    let work = tmp.path().join("w");
    init_repo(&work);
    let tip = commit_files(&work, &[("a", "from a profile\n")], "one");
    let url = server.url("app");
    git(&work, &["push", "-q", &url, "main"]);
    let clone = tmp.path().join("clone");
    git(tmp.path(), &["clone", "-q", &url, clone.to_str().unwrap()]);
    assert_eq!(git_out(&clone, &["rev-parse", "HEAD"]), tip);

    // A profile that does not exist: the start fails and says why.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gitstow"))
        .arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .args(store.args())
        .args(["--s3-read-timeout", "2", "--s3-retry-deadline", "2"])
        .env("AWS_SHARED_CREDENTIALS_FILE", &credentials)
        .env("AWS_CONFIG_FILE", &config)
        .env("AWS_PROFILE", "no-such-profile")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot open store"), "{err}");
    assert!(err.to_lowercase().contains("credentials"), "{err}");
}

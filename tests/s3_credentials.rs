//! The AWS credential chain with the real S3 server: no keys on the command
//! line or in `AWS_ACCESS_KEY_ID`, but a profile in the shared credentials
//! file named by `AWS_PROFILE` (and its region in the shared config file):
//! pushes and clones work; a profile that does not exist fails at start,
//! saying so. And web identity (EKS's `AWS_WEB_IDENTITY_TOKEN_FILE`,
//! `AWS_ROLE_ARN`): the token is exchanged at STS for temporary keys,
//! which are refreshed before they expire. The STS here is a stand-in on
//! loopback (`AWS_ENDPOINT_URL_STS`) that hands out the S3 server's keys
//! with a session token; the S3 server is the real one. Needs the S3 server of the other S3 tests (`S3_ENDPOINT`…;
//! `./scripts/test` starts one) and fails without it.

mod common;

use common::*;
use std::time::{Duration, SystemTime};

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

    // A wrong secret: the start fails at once (no retries of a 403), saying
    // the credentials were refused and naming the flags, not the secret.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gitstow"))
        .arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .args(store.args())
        .args(["--s3-access-key", &key])
        .args(["--s3-secret-key", "not-the-secret-0123456789abcdefghijklmn"])
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("refused the credentials for bucket"), "{err}");
    assert!(err.contains("--s3-secret-key"), "{err}");
    assert!(
        !err.contains("not-the-secret"),
        "the secret is not echoed: {err}"
    );
}

/// An STS `AssumeRoleWithWebIdentity` answer with these keys, expiring
/// `ttl` from now.
fn sts_answer(key: &str, secret: &str, ttl: Duration) -> Answer {
    let expires = (SystemTime::now() + ttl)
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ", "-d"])
        .arg(format!("@{expires}"))
        .output()
        .unwrap();
    let expiration = String::from_utf8(out.stdout).unwrap();
    Answer::Status(
        200,
        format!(
            "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
             <AssumeRoleWithWebIdentityResult>\
             <AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/gitstow/test</Arn>\
             <AssumedRoleId>AROA123:test</AssumedRoleId></AssumedRoleUser>\
             <Credentials><AccessKeyId>{key}</AccessKeyId><SecretAccessKey>{secret}</SecretAccessKey>\
             <SessionToken>test-session-token</SessionToken><Expiration>{}</Expiration></Credentials>\
             </AssumeRoleWithWebIdentityResult>\
             <ResponseMetadata><RequestId>1</RequestId></ResponseMetadata>\
             </AssumeRoleWithWebIdentityResponse>",
            expiration.trim()
        ),
    )
}

#[test]
fn credentials_come_from_web_identity_and_are_refreshed() {
    let (store, key, secret) = store_without_keys();
    let tmp = tempfile::tempdir().unwrap();
    let token = tmp.path().join("token");
    std::fs::write(&token, "eyJhbGciOiJSUzI1NiJ9.test-service-account.sig").unwrap();
    // Temporary keys that expire soon: the next requests must fetch new ones.
    let issued = std::time::Instant::now();
    let sts = Receiver::start(sts_answer(&key, &secret, Duration::from_secs(15)));
    let sts_url = sts.url("");
    let nowhere = tmp.path().join("no-such-file");
    let env = [
        ("AWS_WEB_IDENTITY_TOKEN_FILE", token.to_str().unwrap()),
        ("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/gitstow"),
        ("AWS_ROLE_SESSION_NAME", "gitstow-test"),
        ("AWS_ENDPOINT_URL_STS", sts_url.as_str()),
        ("AWS_SHARED_CREDENTIALS_FILE", nowhere.to_str().unwrap()),
        ("AWS_CONFIG_FILE", nowhere.to_str().unwrap()),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ];
    let server = Server::start_on(Some(&store), &["--no-maintenance"], &env);
    let work = tmp.path().join("w");
    init_repo(&work);
    let tip = commit_files(&work, &[("a", "through web identity\n")], "one");
    let url = server.url("app");
    git(&work, &["push", "-q", &url, "main"]);

    let asked = sts.received();
    assert!(!asked.is_empty(), "STS was not asked");
    let form = String::from_utf8_lossy(&asked[0].body).into_owned();
    for part in [
        "Action=AssumeRoleWithWebIdentity",
        "RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fgitstow",
        "RoleSessionName=gitstow-test",
        "WebIdentityToken=eyJhbGciOiJSUzI1NiJ9.test-service-account.sig",
    ] {
        assert!(form.contains(part), "{part} not in the STS request: {form}");
    }

    // Within 3 s of the keys' expiry (the SDK refreshes 5 to 10 s before
    // it, by a random jitter), the next request takes new ones from STS,
    // and the clone works with them.
    let before = sts.received().len();
    std::thread::sleep(Duration::from_secs(12).saturating_sub(issued.elapsed()));
    sts.answer(sts_answer(&key, &secret, Duration::from_secs(3600)));
    let clone = tmp.path().join("clone");
    git(tmp.path(), &["clone", "-q", &url, clone.to_str().unwrap()]);
    assert_eq!(git_out(&clone, &["rev-parse", "HEAD"]), tip);
    assert!(
        sts.received().len() > before,
        "the keys were not refreshed from STS ({before} requests before, {} after)",
        sts.received().len()
    );
}

//! Shared by the S3 tests: the server from the `S3_*` variables, per-test
//! key prefixes, stores, and test data.
#![allow(dead_code)] // each test file uses its own subset

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use gitstow_store::{S3Config, S3Store};
use sha2::{Digest, Sha256};

pub const MIB: usize = 1 << 20;

pub struct Server {
    pub endpoint: String,
    pub region: String,
    pub access_key: String,
    pub secret_key: String,
    pub bucket: String,
}

pub fn server() -> Server {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let Some(endpoint) = var("S3_ENDPOINT") else {
        panic!(
            "S3 tests need a running S3 server: run `bash scripts/s3-radosgw.sh start` and export \
             its env (`eval \"$(bash scripts/s3-radosgw.sh env)\"`); S3_ENDPOINT is not set"
        );
    };
    let need =
        |name: &str| var(name).unwrap_or_else(|| panic!("S3_ENDPOINT is set but {name} is not"));
    Server {
        endpoint,
        region: var("S3_REGION").unwrap_or_else(|| "us-east-1".into()),
        access_key: need("S3_ACCESS_KEY"),
        secret_key: need("S3_SECRET_KEY"),
        bucket: need("S3_BUCKET"),
    }
}

/// A prefix no other test or run uses.
pub fn unique_prefix(test: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("test-{nanos:x}-{}-{n}/{test}", std::process::id())
}

pub fn config(test: &str) -> S3Config {
    let s = server();
    let mut c = S3Config::new(s.bucket, unique_prefix(test));
    c.endpoint = Some(s.endpoint);
    c.region = Some(s.region);
    c.path_style = true;
    c.access_key = Some(s.access_key);
    c.secret_key = Some(s.secret_key);
    c
}

pub fn store(test: &str) -> Arc<S3Store> {
    Arc::new(S3Store::new(config(test)).unwrap())
}

pub fn sha(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// `len` bytes that differ per position and per `seed`.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .rotate_left(seed as u32 % 31) as u8
                ^ seed
        })
        .collect()
}

pub fn write_file(dir: &Path, name: &str, data: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(data).unwrap();
    f.sync_all().unwrap();
    path
}

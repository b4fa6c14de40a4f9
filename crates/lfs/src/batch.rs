//! The answer to a batch request (git-lfs `docs/api/batch.md`): the
//! `basic` transfer, an upload or download action per object, or a
//! per-object error.
//!
//! Where the store presigns (S3), the actions go to the bucket itself: a
//! presigned GetObject of the object's key, a presigned PutObject of a
//! staging key ([`crate::keys::staging`]) whose size and SHA-256 are
//! signed, then verify at gitstow. Elsewhere (the local store, an upload
//! larger than one PUT takes) they go through gitstow, authorized by a
//! [`crate::grant`] in their `Authorization` header. Verify always carries
//! the grant.

use std::collections::BTreeMap;

use gitstow_store::{ObjectStore, PresignRequest, Presigned};

use crate::api::{Action, Actions, BatchRequest, BatchResponse, ObjectAnswer, ObjectError};
use crate::grant::{Operation, TransferKey};
use crate::{objects, Oid};

/// Why a whole batch request is refused (the HTTP status is the spec's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// An operation other than `download` or `upload` (422).
    #[error("unknown operation '{0}': expected 'download' or 'upload'")]
    Operation(String),
    /// A hash other than SHA-256 (409).
    #[error("unsupported hash algorithm '{0}': this server uses sha256")]
    HashAlgo(String),
    /// The client offers no `basic` transfer (422).
    #[error("no supported transfer adapter: this server offers 'basic'")]
    Transfer,
    /// More objects than [`crate::api::MAX_OBJECTS`] (413).
    #[error("too many objects in one batch: {0} (at most {max})", max = crate::api::MAX_OBJECTS)]
    TooMany(usize),
}

impl BatchError {
    /// The HTTP status of the answer.
    pub fn status(&self) -> u16 {
        match self {
            BatchError::Operation(_) | BatchError::Transfer => 422,
            BatchError::HashAlgo(_) => 409,
            BatchError::TooMany(_) => 413,
        }
    }
}

/// What the answer depends on besides the request.
pub struct Batch<'a> {
    /// The repository, as in its URL (`org/repo`).
    pub repo: &'a str,
    /// The repository's LFS URL: `http(s)://HOST/org/repo.git/info/lfs`.
    pub lfs_url: &'a str,
    /// Signs the actions' grants.
    pub key: &'a TransferKey,
    /// Now, in seconds since the epoch.
    pub now: u64,
    /// Seconds an action stays valid.
    pub ttl: u64,
    /// Largest object accepted, in bytes.
    pub max_size: u64,
}

/// The largest upload sent straight to the bucket (one PutObject takes at
/// most 5 GiB); larger ones go through gitstow.
pub const MAX_PRESIGNED_PUT: u64 = 5 << 30;

/// The operation a request asks for, or why it is refused.
///
/// # Errors
/// [`BatchError`] for the request as a whole.
pub fn operation(req: &BatchRequest) -> Result<Operation, BatchError> {
    if let Some(algo) = req.hash_algo.as_deref().filter(|a| *a != "sha256") {
        return Err(BatchError::HashAlgo(algo.to_owned()));
    }
    if req
        .transfers
        .as_ref()
        .is_some_and(|t| !t.iter().any(|t| t == "basic"))
    {
        return Err(BatchError::Transfer);
    }
    if req.objects.len() > crate::api::MAX_OBJECTS {
        return Err(BatchError::TooMany(req.objects.len()));
    }
    match req.operation.as_str() {
        "download" => Ok(Operation::Download),
        "upload" => Ok(Operation::Upload),
        other => Err(BatchError::Operation(other.to_owned())),
    }
}

impl Batch<'_> {
    /// The answer to `req` for `op` (from [`operation`]): one store read per
    /// object (the repository's marker).
    ///
    /// # Errors
    /// The store failed.
    pub fn answer(
        &self,
        store: &dyn ObjectStore,
        req: &BatchRequest,
        op: Operation,
    ) -> Result<BatchResponse, gitstow_store::Error> {
        let mut answers = Vec::with_capacity(req.objects.len());
        for spec in &req.objects {
            let mut answer = ObjectAnswer {
                oid: spec.oid.clone(),
                size: spec.size,
                authenticated: None,
                actions: None,
                error: None,
            };
            let refuse = |code: u16, message: String| ObjectError { code, message };
            let (Some(oid), Ok(size)) = (Oid::parse(&spec.oid), u64::try_from(spec.size)) else {
                answer.error = Some(refuse(
                    422,
                    "invalid object: an oid is 64 lowercase hex digits, a size at least 0".into(),
                ));
                answers.push(answer);
                continue;
            };
            let owned = objects::owned_size(store, self.repo, &oid)?;
            match op {
                Operation::Download => match owned {
                    Some(stored) => {
                        let presigned = store.presign(
                            PresignRequest::Get {
                                key: &crate::keys::object(&oid),
                            },
                            std::time::Duration::from_secs(self.ttl),
                        )?;
                        let download = match presigned {
                            Some(p) => presigned_action(p),
                            None => self.action(op, &oid, stored, "objects/", true),
                        };
                        answer.authenticated = Some(true);
                        answer.actions = Some(Actions {
                            download: Some(download),
                            ..Actions::default()
                        });
                    }
                    None => answer.error = Some(refuse(404, "Object does not exist".into())),
                },
                Operation::Upload if size > self.max_size => {
                    answer.error = Some(refuse(
                        422,
                        format!(
                            "object of {size} bytes exceeds the limit of {} bytes",
                            self.max_size
                        ),
                    ));
                }
                Operation::Upload
                    if owned == Some(size) && objects::stored_size(store, &oid)? == Some(size) =>
                {
                    // Nothing to send; the claim is renewed, so that collection
                    // keeps it a grace period from now (the push that brings
                    // its pointer is on its way).
                    objects::claim(store, self.repo, &oid, size)?;
                }
                Operation::Upload => {
                    let verify = self.action(op, &oid, size, "verify", false);
                    let presigned = match verify_grant_upload_id(&verify) {
                        Some(upload) if size <= MAX_PRESIGNED_PUT => store.presign(
                            PresignRequest::Put {
                                key: &crate::keys::staging(&oid, &upload),
                                size,
                                sha256: *oid.as_bytes(),
                            },
                            std::time::Duration::from_secs(self.ttl),
                        )?,
                        _ => None,
                    };
                    let upload = match presigned {
                        Some(p) => presigned_action(p),
                        None => self.action(op, &oid, size, "objects/", true),
                    };
                    answer.authenticated = Some(true);
                    answer.actions = Some(Actions {
                        upload: Some(upload),
                        verify: Some(verify),
                        ..Actions::default()
                    });
                }
            }
            answers.push(answer);
        }
        Ok(BatchResponse {
            transfer: "basic",
            objects: answers,
            hash_algo: "sha256",
        })
    }

    /// An action at `lfs_url/<path>` (`<path><oid>` when `with_oid`),
    /// authorized by a grant of `op` on `oid` of `size` bytes.
    fn action(&self, op: Operation, oid: &Oid, size: u64, path: &str, with_oid: bool) -> Action {
        let grant = self
            .key
            .grant(op, self.repo, oid, size, self.now + self.ttl);
        let href = if with_oid {
            format!("{}/{path}{oid}", self.lfs_url)
        } else {
            format!("{}/{path}", self.lfs_url)
        };
        Action {
            href,
            header: BTreeMap::from([("Authorization".to_owned(), format!("RemoteAuth {grant}"))]),
            expires_in: self.ttl,
        }
    }
}

/// The upload id of a verify action's grant.
fn verify_grant_upload_id(verify: &Action) -> Option<String> {
    crate::grant::upload_id(
        verify
            .header
            .get("Authorization")?
            .strip_prefix("RemoteAuth ")?,
    )
}

/// An action of a presigned request: its URL and the headers it signed
/// that the client must send (not `Host` nor `Content-Length`, which the
/// client's HTTP library sets from the URL and the body).
fn presigned_action(p: Presigned) -> Action {
    Action {
        href: p.url,
        header: p
            .headers
            .into_iter()
            .filter(|(k, _)| {
                !k.eq_ignore_ascii_case("host") && !k.eq_ignore_ascii_case("content-length")
            })
            .collect(),
        expires_in: p.expires_in.as_secs(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ObjectSpec;

    fn request(op: &str, objects: &[(&str, i64)]) -> BatchRequest {
        BatchRequest {
            operation: op.into(),
            transfers: Some(vec!["basic".into()]),
            objects: objects
                .iter()
                .map(|(o, s)| ObjectSpec {
                    oid: (*o).into(),
                    size: *s,
                })
                .collect(),
            hash_algo: Some("sha256".into()),
        }
    }

    #[test]
    fn requests_the_server_cannot_serve_are_refused_whole() {
        let mut r = request("upload", &[]);
        r.hash_algo = Some("sha512".into());
        assert_eq!(operation(&r).unwrap_err().status(), 409);
        let mut r = request("upload", &[]);
        r.transfers = Some(vec!["tus".into()]);
        assert_eq!(operation(&r), Err(BatchError::Transfer));
        assert_eq!(
            operation(&request("delete", &[])).unwrap_err().status(),
            422
        );
        let many: Vec<(&str, i64)> = vec![("a", 1); 1001];
        assert_eq!(
            operation(&request("download", &many)).unwrap_err().status(),
            413
        );
        let mut r = request("download", &[]);
        (r.transfers, r.hash_algo) = (None, None);
        assert_eq!(operation(&r), Ok(Operation::Download));
    }

    #[test]
    fn each_object_gets_its_action_or_its_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = gitstow_store::FsStore::new(dir.path()).unwrap();
        let key = TransferKey::from_secret([1; 32]);
        let owned = Oid::from_digest([0xab; 32]);
        store
            .put(
                &crate::keys::owned("org/r", &owned),
                b"5",
                gitstow_store::PutCondition::None,
            )
            .unwrap();
        store
            .put(
                &crate::keys::object(&owned),
                b"12345",
                gitstow_store::PutCondition::None,
            )
            .unwrap();
        let batch = Batch {
            repo: "org/r",
            lfs_url: "http://h/org/r.git/info/lfs",
            key: &key,
            now: 100,
            ttl: 900,
            max_size: 10,
        };
        let absent = Oid::from_digest([0xcd; 32]).to_string();
        let owned_hex = owned.to_string();
        let objs = [
            (owned_hex.as_str(), 5),
            (absent.as_str(), 7),
            ("../x", 1),
            (absent.as_str(), -1),
            (absent.as_str(), 11),
        ];
        let down = batch
            .answer(&store, &request("download", &objs), Operation::Download)
            .unwrap();
        let codes: Vec<Option<u16>> = down
            .objects
            .iter()
            .map(|o| o.error.as_ref().map(|e| e.code))
            .collect();
        assert_eq!(codes, [None, Some(404), Some(422), Some(422), Some(404)]);
        let get = down.objects[0]
            .actions
            .as_ref()
            .unwrap()
            .download
            .as_ref()
            .unwrap();
        assert_eq!(
            get.href,
            format!("http://h/org/r.git/info/lfs/objects/{owned_hex}")
        );
        let grant = get.header["Authorization"]
            .strip_prefix("RemoteAuth ")
            .unwrap();
        assert_eq!(
            key.check(grant, Operation::Download, "org/r", &owned, 1000),
            Ok(5)
        );
        assert_eq!(down.objects[0].authenticated, Some(true));

        let up = batch
            .answer(&store, &request("upload", &objs), Operation::Upload)
            .unwrap();
        // owned already: nothing to do; absent: upload and verify; too large: 422
        assert!(up.objects[0].actions.is_none() && up.objects[0].error.is_none());
        // ... and its claim was renewed (dated now)
        let (marker, _) = store
            .get(&crate::keys::owned("org/r", &owned))
            .unwrap()
            .unwrap();
        assert!(crate::objects::Marker::parse(&marker)
            .unwrap()
            .created
            .is_some());
        // a claim whose bytes are gone is uploaded again (a repair)
        store.delete(&crate::keys::object(&owned)).unwrap();
        let again = batch
            .answer(&store, &request("upload", &objs[..1]), Operation::Upload)
            .unwrap();
        assert!(again.objects[0].actions.as_ref().unwrap().upload.is_some());
        let actions = up.objects[1].actions.as_ref().unwrap();
        let put = actions.upload.as_ref().unwrap();
        let grant = put.header["Authorization"]
            .strip_prefix("RemoteAuth ")
            .unwrap();
        let absent_oid = Oid::parse(&absent).unwrap();
        assert_eq!(
            key.check(grant, Operation::Upload, "org/r", &absent_oid, 1000),
            Ok(7)
        );
        assert_eq!(
            actions.verify.as_ref().unwrap().href,
            "http://h/org/r.git/info/lfs/verify"
        );
        assert_eq!(up.objects[4].error.as_ref().unwrap().code, 422);
    }
}

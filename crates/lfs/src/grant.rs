//! Transfer grants: what an upload or download action carries
//! (`Authorization: RemoteAuth <grant>`) instead of the user's credentials,
//! so that the client sends none with it (`authenticated: true`) and a
//! leaked URL gives one operation on one object for a few minutes.
//!
//! A grant is `v1.<size>.<expires>.<mac>`: the size in bytes the transfer
//! carries, its expiry in seconds since the epoch, and the HMAC-SHA256 (hex)
//! of the operation, repository, oid, size and expiry under a secret kept
//! in the store ([`crate::keys::TRANSFER_KEY`], made by the first instance,
//! read by every other). Checked in constant time.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use gitstow_store::{ObjectStore, PutCondition};

use crate::Oid;

/// The `N` fields of `grant` after its version `tag` (`tag.f1.f2…`);
/// `None` for another version or another number of fields.
fn fields<'a, const N: usize>(grant: &'a str, tag: &str) -> Option<[&'a str; N]> {
    let mut parts = grant.split('.');
    if parts.next()? != tag {
        return None;
    }
    let out: [&str; N] = std::array::from_fn(|_| parts.next().unwrap_or(""));
    (parts.next().is_none() && out.iter().all(|f| !f.is_empty())).then_some(out)
}

/// What a grant allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// `PUT` the object's bytes.
    Upload,
    /// `GET` the object's bytes.
    Download,
}

impl Operation {
    fn name(self) -> &'static str {
        match self {
            Operation::Upload => "upload",
            Operation::Download => "download",
        }
    }
}

/// Why a grant is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// Not a grant, or one for another operation, repository or object.
    #[error("the transfer's authorization is not valid for this object")]
    Invalid,
    /// Past its expiry.
    #[error("the transfer's authorization has expired; run the command again")]
    Expired,
}

/// The secret that signs grants.
#[derive(Clone)]
pub struct TransferKey {
    secret: [u8; 32],
}

impl std::fmt::Debug for TransferKey {
    /// Never prints the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TransferKey(..)")
    }
}

impl TransferKey {
    /// The store's key, made (32 random bytes, written only if absent, so
    /// two instances starting at once agree) when there is none.
    ///
    /// # Errors
    /// The store failed, or the stored key is not 64 hex digits.
    pub fn load_or_create(store: &dyn ObjectStore) -> Result<TransferKey, gitstow_store::Error> {
        use crate::keys::TRANSFER_KEY;
        let broken = |why: &str| gitstow_store::Error::Io {
            key: TRANSFER_KEY.into(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_owned()),
        };
        let parse = |data: &[u8]| -> Result<TransferKey, gitstow_store::Error> {
            let mut secret = [0u8; 32];
            hex::decode_to_slice(data.trim_ascii(), &mut secret)
                .map_err(|_| broken("the LFS transfer key is not 64 hex digits"))?;
            Ok(TransferKey { secret })
        };
        if let Some((data, _)) = store.get(TRANSFER_KEY)? {
            return parse(&data);
        }
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| broken(&e.to_string()))?;
        match store.put(
            TRANSFER_KEY,
            hex::encode(secret).as_bytes(),
            PutCondition::IfAbsent,
        ) {
            Ok(_) => Ok(TransferKey { secret }),
            Err(gitstow_store::Error::PreconditionFailed { .. }) => {
                let (data, _) = store
                    .get(TRANSFER_KEY)?
                    .ok_or_else(|| broken("the LFS transfer key vanished"))?;
                parse(&data)
            }
            Err(e) => Err(e),
        }
    }

    /// A key of `secret` (tests).
    pub fn from_secret(secret: [u8; 32]) -> TransferKey {
        TransferKey { secret }
    }

    fn mac(&self, op: Operation, repo: &str, oid: &Oid, size: u64, expires: u64) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes any key length");
        mac.update(
            format!(
                "gitstow-lfs-v1\n{}\n{repo}\n{oid}\n{size}\n{expires}",
                op.name()
            )
            .as_bytes(),
        );
        mac
    }

    /// The grant of `op` on `oid` (`size` bytes) in `repo` until `expires`
    /// (seconds since the epoch).
    pub fn grant(&self, op: Operation, repo: &str, oid: &Oid, size: u64, expires: u64) -> String {
        let tag = self
            .mac(op, repo, oid, size, expires)
            .finalize()
            .into_bytes();
        format!("v1.{size}.{expires}.{}", hex::encode(tag))
    }

    /// Checks `grant` for `op` on `oid` in `repo` at `now` (seconds since
    /// the epoch); returns the size it was given for.
    ///
    /// # Errors
    /// [`GrantError`].
    pub fn check(
        &self,
        grant: &str,
        op: Operation,
        repo: &str,
        oid: &Oid,
        now: u64,
    ) -> Result<u64, GrantError> {
        let Some([size, expires, tag]) = fields(grant, "v1") else {
            return Err(GrantError::Invalid);
        };
        let size: u64 = size.parse().map_err(|_| GrantError::Invalid)?;
        let expires: u64 = expires.parse().map_err(|_| GrantError::Invalid)?;
        let tag = hex::decode(tag).map_err(|_| GrantError::Invalid)?;
        self.mac(op, repo, oid, size, expires)
            .verify_slice(&tag)
            .map_err(|_| GrantError::Invalid)?;
        if now > expires {
            return Err(GrantError::Expired);
        }
        Ok(size)
    }
}

/// What a session grant ([`TransferKey::session`]) lets its bearer do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Upload (`write`) rather than download (`read`).
    pub upload: bool,
    /// The token the SSH key belongs to: whose rights are checked, who owns
    /// the locks it takes.
    pub token: String,
    /// Which token of that name (a prefix of its stored hash): one made
    /// later under the name does not inherit the session.
    pub token_id: String,
}

impl TransferKey {
    /// A session grant: what `git-lfs-authenticate` over SSH answers, the
    /// `Authorization: RemoteAuth <grant>` of the batch and lock requests of
    /// one operation (`upload` or download) on `repo` by the token named
    /// `token` (whose id is `token_id`, hex), until `expires` (seconds since
    /// the epoch): `s1.<u|d>.<expires>.<hex(token)>.<token_id>.<mac>`. The
    /// token's rights are still checked on each request.
    pub fn session(
        &self,
        upload: bool,
        repo: &str,
        token: &str,
        token_id: &str,
        expires: u64,
    ) -> String {
        let op = if upload { "u" } else { "d" };
        let name = hex::encode(token);
        let tag = self
            .session_mac(op, repo, &name, token_id, expires)
            .finalize()
            .into_bytes();
        format!("s1.{op}.{expires}.{name}.{token_id}.{}", hex::encode(tag))
    }

    fn session_mac(
        &self,
        op: &str,
        repo: &str,
        name: &str,
        token_id: &str,
        expires: u64,
    ) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes any key length");
        mac.update(
            format!("gitstow-lfs-session-v1\n{op}\n{repo}\n{name}\n{token_id}\n{expires}")
                .as_bytes(),
        );
        mac
    }

    /// Checks session grant `grant` for `repo` at `now`.
    ///
    /// # Errors
    /// [`GrantError`].
    pub fn check_session(&self, grant: &str, repo: &str, now: u64) -> Result<Session, GrantError> {
        let Some([op @ ("u" | "d"), expires, name, token_id, tag]) = fields(grant, "s1") else {
            return Err(GrantError::Invalid);
        };
        let expires: u64 = expires.parse().map_err(|_| GrantError::Invalid)?;
        let tag = hex::decode(tag).map_err(|_| GrantError::Invalid)?;
        self.session_mac(op, repo, name, token_id, expires)
            .verify_slice(&tag)
            .map_err(|_| GrantError::Invalid)?;
        if now > expires {
            return Err(GrantError::Expired);
        }
        let token = hex::decode(name)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or(GrantError::Invalid)?;
        Ok(Session {
            upload: op == "u",
            token,
            token_id: token_id.to_owned(),
        })
    }
}

/// The id of the upload a grant authorizes, `<expires>-<32 hex digits of
/// its mac>`: names its staging key ([`crate::keys::staging`]) and says
/// when the upload's window closed ([`upload_expiry`]); `None` for what is
/// not a grant's shape.
pub fn upload_id(grant: &str) -> Option<String> {
    let [_size, expires, tag] = fields(grant, "v1")?;
    let expires: u64 = expires.parse().ok()?;
    (tag.len() == 64 && tag.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| format!("{expires}-{}", &tag[..32]))
}

/// When the upload of `id` ([`upload_id`]) could no longer start, in
/// seconds since the epoch.
pub fn upload_expiry(id: &str) -> Option<u64> {
    id.split_once('-')?.0.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oid(b: u8) -> Oid {
        Oid::from_digest([b; 32])
    }

    #[test]
    fn a_grant_opens_one_operation_on_one_object_until_it_expires() {
        let key = TransferKey::from_secret([7; 32]);
        let g = key.grant(Operation::Upload, "org/r", &oid(1), 42, 1000);
        assert_eq!(
            key.check(&g, Operation::Upload, "org/r", &oid(1), 999),
            Ok(42)
        );
        assert_eq!(
            key.check(&g, Operation::Upload, "org/r", &oid(1), 1000),
            Ok(42)
        );
        assert_eq!(
            key.check(&g, Operation::Upload, "org/r", &oid(1), 1001),
            Err(GrantError::Expired)
        );
        for (op, repo, o) in [
            (Operation::Download, "org/r", oid(1)),
            (Operation::Upload, "org/s", oid(1)),
            (Operation::Upload, "org/r", oid(2)),
        ] {
            assert_eq!(key.check(&g, op, repo, &o, 0), Err(GrantError::Invalid));
        }
        let other = TransferKey::from_secret([8; 32]);
        assert_eq!(
            other.check(&g, Operation::Upload, "org/r", &oid(1), 0),
            Err(GrantError::Invalid)
        );
        // a size or expiry changed by the client breaks the mac
        let forged = g.replacen("v1.42.", "v1.43.", 1);
        assert_eq!(
            key.check(&forged, Operation::Upload, "org/r", &oid(1), 0),
            Err(GrantError::Invalid)
        );
        let later = g.replacen(".1000.", ".9999.", 1);
        assert_eq!(
            key.check(&later, Operation::Upload, "org/r", &oid(1), 0),
            Err(GrantError::Invalid)
        );
        for junk in [
            "",
            "v1",
            "v1.1.2",
            "v2.42.1000.00",
            "v1.x.1000.00",
            "v1.42.1000.zz",
        ] {
            assert_eq!(
                key.check(junk, Operation::Upload, "org/r", &oid(1), 0),
                Err(GrantError::Invalid)
            );
        }
    }

    #[test]
    fn a_session_is_one_operation_on_one_repository_for_one_token() {
        let key = TransferKey::from_secret([7; 32]);
        let g = key.session(true, "org/r", "alice", "00ff", 100);
        assert_eq!(
            key.check_session(&g, "org/r", 50),
            Ok(Session {
                upload: true,
                token: "alice".into(),
                token_id: "00ff".into()
            })
        );
        // the same name, another token: not this session
        let other_alice = g.replacen(".00ff.", ".0100.", 1);
        assert_eq!(
            key.check_session(&other_alice, "org/r", 50),
            Err(GrantError::Invalid)
        );
        assert_eq!(key.check_session(&g, "org/s", 50), Err(GrantError::Invalid));
        assert_eq!(
            key.check_session(&g, "org/r", 101),
            Err(GrantError::Expired)
        );
        let as_download = g.replacen("s1.u.", "s1.d.", 1);
        assert_eq!(
            key.check_session(&as_download, "org/r", 50),
            Err(GrantError::Invalid)
        );
        let as_bob = g.replacen(&hex::encode("alice"), &hex::encode("bob"), 1);
        assert_eq!(
            key.check_session(&as_bob, "org/r", 50),
            Err(GrantError::Invalid)
        );
        // a transfer grant is not a session, nor the other way round
        let t = key.grant(Operation::Upload, "org/r", &oid(1), 1, 100);
        assert_eq!(key.check_session(&t, "org/r", 50), Err(GrantError::Invalid));
        assert_eq!(
            key.check(&g, Operation::Upload, "org/r", &oid(1), 50),
            Err(GrantError::Invalid)
        );
    }

    #[test]
    fn instances_on_one_store_share_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = gitstow_store::FsStore::new(dir.path()).unwrap();
        let a = TransferKey::load_or_create(&store).unwrap();
        let b = TransferKey::load_or_create(&store).unwrap();
        assert_eq!(a.secret, b.secret);
        let g = a.grant(Operation::Download, "r", &oid(3), 1, 10);
        assert_eq!(b.check(&g, Operation::Download, "r", &oid(3), 5), Ok(1));
    }
}

//! File locks (git-lfs `docs/api/locking.md`): `POST locks` (create; a
//! `write` grant), `GET locks` (list; `read`), `POST locks/verify` (ours
//! and theirs; `write`), `POST locks/<id>/unlock` (one's own with `write`,
//! another's with `force` and `admin`). The owner is the token's name
//! (`anonymous` while access control is off); the document is
//! [`gitstow_lfs::locks`]'s.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use gitstow_lfs::locks::{self, Created, LockError, Unlocked};
use gitstow_service::gate::Level;
use gitstow_service::mirrors::LfsAccess;
use serde::Deserialize;

use super::{json, lfs_error, now_secs, store_failed, Call};

/// `POST locks`.
#[derive(Debug, Deserialize)]
struct CreateRequest {
    path: String,
}

/// `POST locks/verify`.
#[derive(Debug, Deserialize)]
struct VerifyRequest {
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

/// `POST locks/<id>/unlock`.
#[derive(Debug, Default, Deserialize)]
struct UnlockRequest {
    #[serde(default)]
    force: bool,
}

/// The owner name of a token (`None`: access control is off).
fn owner(token: Option<String>) -> String {
    token.unwrap_or_else(|| locks::ANONYMOUS.to_owned())
}

/// A [`LockError`] answered: 422 for a bad path or too many locks, 429
/// when concurrent changes kept winning, else a server failure.
fn lock_error(e: LockError) -> Response {
    match e {
        LockError::BadPath(_) | LockError::TooMany => {
            lfs_error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
        }
        LockError::Busy => {
            let mut resp = lfs_error(StatusCode::TOO_MANY_REQUESTS, e.to_string());
            resp.headers_mut()
                .insert("Retry-After", HeaderValue::from_static("1"));
            resp
        }
        LockError::Corrupt(_) => store_failed("reading the locks", &e),
        LockError::Store(ref s) => store_failed("changing the locks", s),
    }
}

/// A JSON answer with `status`.
fn json_with(status: StatusCode, value: &serde_json::Value) -> Response {
    let mut resp = json(value);
    *resp.status_mut() = status;
    resp
}

impl Call {
    /// Runs `f` on the store off the runtime.
    async fn on_store<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn gitstow_store::ObjectStore, &str) -> Result<T, LockError> + Send + 'static,
    ) -> Result<T, Response> {
        let store = self.app.host.store().clone();
        let repo = self.name.clone();
        match tokio::task::spawn_blocking(move || f(store.as_ref(), &repo)).await {
            Ok(r) => r.map_err(lock_error),
            Err(e) => Err(store_failed("changing the locks", &e)),
        }
    }

    /// `POST locks`: 201 with the lock, 409 with the lock that holds the
    /// path already.
    pub(super) async fn lock(
        self,
        body: Body,
        logged: &mut crate::request_log::Logged,
    ) -> Response {
        // Credentials before the body: nobody without them makes the
        // server read a request.
        let me = match self.credentials(Level::Write, logged).await {
            Ok(t) => owner(t),
            Err(resp) => return resp,
        };
        let req: CreateRequest = match self.read_json(body).await {
            Ok(r) => r,
            Err(resp) => return resp,
        };
        // A lock belongs to a repository that exists.
        if let Err(resp) = self.repository_for(LfsAccess::Download).await {
            return resp;
        }
        let now = now_secs();
        let created = self
            .on_store(move |s, repo| locks::create(s, repo, &req.path, &me, now))
            .await;
        match created {
            Ok(Created::New(lock)) => {
                tracing::info!(repo = %self.name, path = %lock.path, owner = %lock.owner.name, "LFS lock created");
                json_with(StatusCode::CREATED, &serde_json::json!({ "lock": lock }))
            }
            Ok(Created::Exists(lock)) => json_with(
                StatusCode::CONFLICT,
                &serde_json::json!({ "lock": lock, "message": "already created lock" }),
            ),
            Err(resp) => resp,
        }
    }

    /// `GET locks?path=&id=&cursor=&limit=`.
    pub(super) async fn list_locks(
        self,
        query: &str,
        logged: &mut crate::request_log::Logged,
    ) -> Response {
        if let Err(resp) = self.credentials(Level::Read, logged).await {
            return resp;
        }
        let mut path = None;
        let mut id = None;
        let mut cursor = None;
        let mut limit = 0usize;
        for (k, v) in form_urlencoded(query) {
            match k.as_str() {
                "path" => path = Some(v),
                "id" => id = Some(v),
                "cursor" => cursor = Some(v),
                "limit" => match v.parse() {
                    Ok(n) => limit = n,
                    Err(_) => {
                        return lfs_error(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            "limit must be a number",
                        )
                    }
                },
                _ => {}
            }
        }
        let all = match self.on_store(|s, repo| locks::all(s, repo)).await {
            Ok(a) => a,
            Err(resp) => return resp,
        };
        let page = locks::page(
            &all,
            |l| {
                path.as_deref().is_none_or(|p| l.path == p)
                    && id.as_deref().is_none_or(|i| l.id == i)
            },
            cursor.as_deref(),
            limit,
        );
        let mut out = serde_json::json!({ "locks": page.locks });
        if let Some(c) = page.next_cursor {
            out["next_cursor"] = c.into();
        }
        json(&out)
    }

    /// `POST locks/verify`: the locks the caller holds (`ours`) and the
    /// others' (`theirs`), one page of each from the cursor.
    pub(super) async fn verify_locks(
        self,
        body: Body,
        logged: &mut crate::request_log::Logged,
    ) -> Response {
        let me = match self.credentials(Level::Write, logged).await {
            Ok(t) => owner(t),
            Err(resp) => return resp,
        };
        let req: VerifyRequest = match self.read_json(body).await {
            Ok(r) => r,
            Err(resp) => return resp,
        };
        let all = match self.on_store(|s, repo| locks::all(s, repo)).await {
            Ok(a) => a,
            Err(resp) => return resp,
        };
        let page = locks::page(
            &all,
            |_| true,
            req.cursor.as_deref(),
            req.limit.unwrap_or(0),
        );
        let (ours, theirs): (Vec<_>, Vec<_>) =
            page.locks.into_iter().partition(|l| l.owner.name == me);
        let mut out = serde_json::json!({ "ours": ours, "theirs": theirs });
        if let Some(c) = page.next_cursor {
            out["next_cursor"] = c.into();
        }
        json(&out)
    }

    /// `POST locks/<id>/unlock`: the caller's own lock, or with `force`
    /// (an `admin` grant) anyone's.
    pub(super) async fn unlock(
        self,
        id: &str,
        body: Body,
        logged: &mut crate::request_log::Logged,
    ) -> Response {
        // Every unlock needs `write`, checked before the body is read; a
        // forced one `admin`, checked once the body says so.
        let me = match self.credentials(Level::Write, logged).await {
            Ok(t) => owner(t),
            Err(resp) => return resp,
        };
        let req: UnlockRequest = match self.read_json(body).await {
            Ok(r) => r,
            Err(resp) => return resp,
        };
        if req.force {
            if let Err(resp) = self.credentials(Level::Admin, logged).await {
                return resp;
            }
        }
        let id = id.to_owned();
        let force = req.force;
        let by = me.clone();
        let done = self
            .on_store(move |s, repo| locks::unlock(s, repo, &id, &by, force))
            .await;
        match done {
            Ok(Unlocked::Removed(lock)) => {
                tracing::info!(repo = %self.name, path = %lock.path, owner = %lock.owner.name, by = %me, force, "LFS lock removed");
                json(&serde_json::json!({ "lock": lock }))
            }
            Ok(Unlocked::NotFound) => lfs_error(StatusCode::NOT_FOUND, "no such lock"),
            Ok(Unlocked::NotOwner(lock)) => lfs_error(
                StatusCode::FORBIDDEN,
                format!(
                    "'{}' is locked by '{}': only they, or an admin with --force, may unlock it",
                    lock.path, lock.owner.name
                ),
            ),
            Err(resp) => resp,
        }
    }
}

/// The pairs of an `application/x-www-form-urlencoded` query, decoded
/// (`+` as space, `%XX`; a bad escape kept as written).
fn form_urlencoded(query: &str) -> Vec<(String, String)> {
    fn hex(c: u8) -> Option<u8> {
        (c as char).to_digit(16).map(|d| d as u8)
    }
    fn decode(s: &str) -> String {
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'+' => out.push(b' '),
                b'%' => match (
                    b.get(i + 1).and_then(|&c| hex(c)),
                    b.get(i + 2).and_then(|&c| hex(c)),
                ) {
                    (Some(h), Some(l)) => {
                        out.push(h << 4 | l);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                },
                c => out.push(c),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k), decode(v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_decode() {
        assert_eq!(
            form_urlencoded("path=art%2Fa+b.psd&limit=5&x&bad=%zz%4&u=%C3%A9%"),
            vec![
                ("path".into(), "art/a b.psd".into()),
                ("limit".into(), "5".into()),
                ("x".into(), "".into()),
                ("bad".into(), "%zz%4".into()),
                ("u".into(), "é%".into()),
            ]
        );
    }
}

//! The access document: one JSON object in the store, read by every
//! instance, changed by conditional PUTs.

use std::sync::Arc;

use gitstow_store::{ETag, ObjectStore, PutCondition};

use crate::token::same_hash;
use crate::{hash_secret, Error, Level, RepoPattern, Result};

/// Key of the access document (under the server's store-wide prefix,
/// [`gitstow_store::SERVER_PREFIX`], which no repository's keys share).
pub const ACCESS_KEY: &str = ".gitstow/access";

/// How many times [`update`] retries a lost conditional PUT.
const UPDATE_ATTEMPTS: u32 = 10;

/// Everything access control keeps (JSON). Unknown fields are refused, so an
/// older server never rewrites a newer document without what it lacks.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessDoc {
    /// Format version (1).
    #[serde(default)]
    pub version: u32,
    /// The tokens, in the order they were created.
    #[serde(default)]
    pub tokens: Vec<StoredToken>,
    /// Repositories anyone may read without credentials.
    #[serde(default)]
    pub anonymous_read: Vec<RepoPattern>,
    /// Protected refs by repository: the first entry whose pattern matches
    /// decides; a repository none matches protects [`DEFAULT_PROTECTED`].
    #[serde(default)]
    pub protected: Vec<Protection>,
    /// Where pushes are announced (in the order they were added).
    #[serde(default)]
    pub webhooks: Vec<Webhook>,
    /// Hidden ref namespaces by repository, added to the server's
    /// `--hide-refs`: every entry whose pattern matches adds its prefixes
    /// (as git's multi-valued `transfer.hideRefs`). Left out of the JSON
    /// when empty, so that a document without them stays readable by
    /// builds that do not know them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<HiddenRefs>,
    /// SSH public keys, each presenting one token
    /// ([`crate::ssh_key`]); left out of the JSON when empty, as
    /// `hidden`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_keys: Vec<crate::StoredKey>,
}

/// Ref namespaces of the repositories a pattern matches that are hidden
/// as git's `transfer.hideRefs` hides them (git-config(1)): in no
/// advertisement, closed to pushes.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HiddenRefs {
    /// The repositories.
    pub repos: RepoPattern,
    /// Prefixes ([`check_hidden_prefix`]): `refs/changes` hides that ref
    /// and every ref below it.
    pub refs: Vec<String>,
}

/// Checks a hidden ref prefix: a namespace under `refs/` (`refs/changes`,
/// `refs/pull/`), without the characters git refuses in ref names;
/// `refs/` alone would hide everything.
pub fn check_hidden_prefix(p: &str) -> Result<()> {
    let t = p.trim_end_matches('/');
    let ok =
        t.len() > "refs/".len() && t.starts_with("refs/") && !t.contains('*') && plain_ref_text(t);
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "invalid hidden ref prefix {p:?}: want a namespace under refs/ (refs/changes, refs/pull)"
        )))
    }
}

/// A receiver of push events for the repositories a pattern matches.
#[derive(Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// Its unique name (as a token's: `[A-Za-z0-9._-]`, 1 to 64 bytes).
    pub name: String,
    /// The repositories whose pushes it receives.
    pub repos: RepoPattern,
    /// Where events are POSTed (`http://` or `https://`).
    pub url: String,
    /// The HMAC-SHA256 key events are signed with. It must be usable to
    /// sign, so it is kept as given (unlike a token's secret): the
    /// bucket must be as private as the repositories in it. Never printed
    /// (see the `Debug` implementation) nor logged.
    pub secret: String,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("name", &self.name)
            .field("repos", &self.repos)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// What a repository protects unless an entry of
/// [`AccessDoc::protected`] says otherwise: the branch HEAD names, and
/// every tag.
pub const DEFAULT_PROTECTED: &[&str] = &["HEAD", "refs/tags/*"];

/// Refs of the repositories a pattern matches that only `admin` may
/// rewrite (force-push) or delete.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Protection {
    /// The repositories.
    pub repos: RepoPattern,
    /// Ref patterns ([`check_ref_pattern`]); empty: nothing protected.
    pub refs: Vec<String>,
}

/// Checks a protected-ref pattern: `HEAD` (the branch HEAD names), a ref
/// name under `refs/`, or a prefix ending in `/*` (`refs/tags/*`, any depth).
pub fn check_ref_pattern(p: &str) -> Result<()> {
    let ok = p == "HEAD"
        || (p.starts_with("refs/")
            && plain_ref_text(p)
            && (!p.contains('*') || (p.ends_with("/*") && p.matches('*').count() == 1)));
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "invalid ref pattern {p:?}: want HEAD, a ref name under refs/, or a prefix ending in /* (refs/tags/*)"
        )))
    }
}

/// No `..`, no `//`, no control character, space or one of `~^:?[\`:
/// what git's check-ref-format refuses in a name (`*` is the caller's).
fn plain_ref_text(t: &str) -> bool {
    !t.contains("..")
        && !t.contains("//")
        && t.bytes()
            .all(|b| b > b' ' && b != 0x7f && !b"~^:?[\\".contains(&b))
}

/// A token as stored: never its secret.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredToken {
    /// Its unique name (`[A-Za-z0-9._-]`, 1 to 64 bytes): what logs and
    /// webhooks name the pusher by.
    pub name: String,
    /// [`hash_secret`] of its secret.
    pub hash: String,
    /// When it was made, seconds since the Unix epoch.
    pub created: u64,
    /// When it stops working, seconds since the Unix epoch; `None`: never.
    pub expires: Option<u64>,
    /// What it may do.
    pub grants: Vec<Grant>,
}

/// One grant: a level on the repositories a pattern matches.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// The repositories.
    pub repos: RepoPattern,
    /// What the token may do there.
    pub level: Level,
}

impl Grant {
    /// Parses `PATTERN:LEVEL` (`org/*:write`).
    pub fn parse(text: &str) -> Result<Grant> {
        let (repos, level) = text.rsplit_once(':').ok_or_else(|| {
            Error::Invalid(format!(
                "invalid grant {text:?}: want PATTERN:LEVEL, e.g. 'org/*:write'"
            ))
        })?;
        Ok(Grant {
            repos: RepoPattern::parse(repos)?,
            level: level.parse()?,
        })
    }
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.repos, self.level)
    }
}

/// Whether a token name is acceptable.
pub(crate) fn check_name(name: &str) -> Result<()> {
    check_name_of("token", name)
}

/// Whether `name` is acceptable as the name of a `what` (token, webhook).
pub(crate) fn check_name_of(what: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "invalid {what} name {name:?}: 1 to 64 letters, digits, '.', '_' or '-'"
        )))
    }
}

/// What a request may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Go ahead.
    Allow,
    /// Credentials are needed (HTTP 401, and git asks its credential helper).
    Unauthenticated,
    /// The token is valid but lacks the right (HTTP 403): a one-line reason
    /// that names the token, the repository and the levels, never a secret.
    Forbidden(String),
}

/// Why a presented secret was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    /// No stored token has its hash (also: revoked).
    Unknown,
    /// The token has expired.
    Expired,
}

impl AccessDoc {
    /// Whether access control is on: some token exists. Without one, every
    /// request is allowed (a server on loopback, or started with
    /// `--insecure-no-auth`).
    pub fn enforced(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The token whose secret is `secret`, if it exists and has not expired
    /// at `now` (seconds since the epoch). The secret's hash is compared
    /// with every stored hash, in constant time, whichever matches.
    pub fn authenticate(&self, secret: &str, now: u64) -> Result<&StoredToken, Rejected> {
        let hash = hash_secret(secret);
        let mut found = None;
        for t in &self.tokens {
            if same_hash(&t.hash, &hash) && found.is_none() {
                found = Some(t);
            }
        }
        let token = found.ok_or(Rejected::Unknown)?;
        if token.expires.is_some_and(|e| e <= now) {
            return Err(Rejected::Expired);
        }
        Ok(token)
    }

    /// The highest level `token` (or, with `None`, an anonymous client) has
    /// on repository `repo`.
    pub fn level(&self, token: Option<&StoredToken>, repo: &str) -> Option<Level> {
        match token {
            Some(t) => t
                .grants
                .iter()
                .filter(|g| g.repos.matches(repo))
                .map(|g| g.level)
                .max(),
            None => self
                .anonymous_read
                .iter()
                .any(|p| p.matches(repo))
                .then_some(Level::Read),
        }
    }

    /// Whether `token` (`None`: no credentials) may do what `needed` allows
    /// on `repo`; everything is allowed while no token exists.
    pub fn decide(&self, token: Option<&StoredToken>, repo: &str, needed: Level) -> Decision {
        if !self.enforced() {
            return Decision::Allow;
        }
        self.decide_enforced(token, repo, needed)
    }

    /// [`AccessDoc::decide`] as if access control were on even without a
    /// token (then nothing but anonymous read is allowed): for a server
    /// that started with access control on, whose last token was revoked.
    pub fn decide_enforced(
        &self,
        token: Option<&StoredToken>,
        repo: &str,
        needed: Level,
    ) -> Decision {
        let has = self.level(token, repo);
        if has.is_some_and(|l| l >= needed) {
            return Decision::Allow;
        }
        match token {
            None => Decision::Unauthenticated,
            Some(t) => Decision::Forbidden(match has {
                Some(l) => format!(
                    "token '{}' has {l} access to {repo}, {needed} is needed",
                    t.name
                ),
                None => format!("token '{}' has no access to {repo}", t.name),
            }),
        }
    }

    /// The ref patterns `repo` protects (see [`AccessDoc::protected`]).
    pub fn protected_refs(&self, repo: &str) -> Vec<String> {
        match self.protected.iter().find(|p| p.repos.matches(repo)) {
            Some(p) => p.refs.clone(),
            None => DEFAULT_PROTECTED.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// The hidden ref prefixes of `repo`: those of every entry of
    /// [`AccessDoc::hidden`] whose pattern matches, in entry order.
    pub fn hidden_refs(&self, repo: &str) -> Vec<String> {
        self.hidden
            .iter()
            .filter(|h| h.repos.matches(repo))
            .flat_map(|h| h.refs.iter().cloned())
            .collect()
    }

    /// Sets the hidden ref prefixes of the repositories `repos` matches,
    /// replacing an entry for the same pattern; an empty `refs` removes
    /// it. Returns whether an entry was replaced or removed.
    ///
    /// # Errors
    /// A prefix [`check_hidden_prefix`] refuses.
    pub fn hide_refs(&mut self, repos: RepoPattern, refs: Vec<String>) -> Result<bool> {
        for r in &refs {
            check_hidden_prefix(r)?;
        }
        let before = self.hidden.len();
        self.hidden.retain(|h| h.repos != repos);
        let replaced = before != self.hidden.len();
        if !refs.is_empty() {
            self.hidden.push(HiddenRefs { repos, refs });
        }
        Ok(replaced)
    }

    /// Sets the protected refs of the repositories `repos` matches (ahead
    /// of every other entry, replacing one for the same pattern).
    pub fn protect(&mut self, repos: RepoPattern, refs: Vec<String>) -> Result<()> {
        for r in &refs {
            check_ref_pattern(r)?;
        }
        self.protected.retain(|p| p.repos != repos);
        self.protected.insert(0, Protection { repos, refs });
        Ok(())
    }

    /// Adds a token named `name` with `grants`, expiring at `expires`;
    /// returns its secret (shown once, never stored).
    pub fn add_token(
        &mut self,
        name: &str,
        grants: Vec<Grant>,
        created: u64,
        expires: Option<u64>,
    ) -> Result<String> {
        check_name(name)?;
        if grants.is_empty() {
            return Err(Error::Invalid("a token needs at least one --grant".into()));
        }
        if self.has_token(name) {
            return Err(Error::Invalid(format!(
                "a token named {name:?} exists already (revoke it first)"
            )));
        }
        let secret = crate::new_secret()?;
        self.tokens.push(StoredToken {
            name: name.to_owned(),
            hash: hash_secret(&secret),
            created,
            expires,
            grants,
        });
        self.version = 1;
        Ok(secret)
    }

    /// Adds a webhook (its name must be new; its URL `http://` or
    /// `https://` with a host).
    pub fn add_webhook(&mut self, hook: Webhook) -> Result<()> {
        check_name_of("webhook", &hook.name)?;
        let rest = hook
            .url
            .strip_prefix("https://")
            .or_else(|| hook.url.strip_prefix("http://"));
        if !rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/'))
            || hook.url.contains(char::is_whitespace)
        {
            return Err(Error::Invalid(format!(
                "invalid webhook URL {:?}: want http://HOST/… or https://HOST/…",
                hook.url
            )));
        }
        if hook.secret.len() < 16 {
            return Err(Error::Invalid(
                "a webhook secret needs at least 16 bytes".into(),
            ));
        }
        if self.webhooks.iter().any(|w| w.name == hook.name) {
            return Err(Error::Invalid(format!(
                "a webhook named {:?} exists already (remove it first)",
                hook.name
            )));
        }
        self.webhooks.push(hook);
        Ok(())
    }

    /// Removes the webhook named `name`; false if there was none.
    pub fn remove_webhook(&mut self, name: &str) -> bool {
        let before = self.webhooks.len();
        self.webhooks.retain(|w| w.name != name);
        before != self.webhooks.len()
    }

    /// The webhooks that receive `repo`'s pushes.
    pub fn webhooks_for<'a>(&'a self, repo: &'a str) -> impl Iterator<Item = &'a Webhook> + 'a {
        self.webhooks.iter().filter(move |w| w.repos.matches(repo))
    }

    /// True when a token named `name` exists.
    pub fn has_token(&self, name: &str) -> bool {
        self.tokens.iter().any(|t| t.name == name)
    }

    /// Removes the token named `name` and the SSH keys attached to it
    /// (a later token of that name does not inherit them); false if there
    /// was none.
    pub fn revoke(&mut self, name: &str) -> bool {
        let before = self.tokens.len();
        self.tokens.retain(|t| t.name != name);
        self.ssh_keys.retain(|k| k.token != name);
        before != self.tokens.len()
    }
}

/// Reads the access document (an empty one when there is none) and its ETag.
pub fn load(store: &dyn ObjectStore) -> Result<(AccessDoc, Option<ETag>)> {
    match store.get(ACCESS_KEY)? {
        None => Ok((AccessDoc::default(), None)),
        Some((bytes, etag)) => Ok((parse(&bytes)?, Some(etag))),
    }
}

/// Decodes a stored document.
pub fn parse(bytes: &[u8]) -> Result<AccessDoc> {
    serde_json::from_slice(bytes).map_err(|e| Error::Corrupt(e.to_string()))
}

/// Changes the document with `change` and writes it back conditionally on
/// the version read (created if absent); a lost race reads again and
/// retries, up to 10 times. `change`'s error leaves the document as it was.
pub fn update<T>(
    store: &Arc<dyn ObjectStore>,
    mut change: impl FnMut(&mut AccessDoc) -> Result<T>,
) -> Result<T> {
    for _ in 0..UPDATE_ATTEMPTS {
        let (mut doc, etag) = load(store.as_ref())?;
        let out = change(&mut doc)?;
        doc.version = 1;
        let bytes = serde_json::to_vec_pretty(&doc).map_err(|e| Error::Corrupt(e.to_string()))?;
        let condition = match etag {
            Some(e) => PutCondition::IfMatch(e),
            None => PutCondition::IfAbsent,
        };
        match store.put(ACCESS_KEY, &bytes, condition) {
            Ok(_) => return Ok(out),
            Err(gitstow_store::Error::PreconditionFailed { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Contended(UPDATE_ATTEMPTS))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc_with(grants: &[&str]) -> (AccessDoc, String) {
        let mut doc = AccessDoc::default();
        let grants = grants.iter().map(|g| Grant::parse(g).unwrap()).collect();
        let secret = doc.add_token("ci", grants, 0, Some(100)).unwrap();
        (doc, secret)
    }

    #[test]
    fn decisions() {
        let (doc, secret) = doc_with(&["org/*:write", "org/ops:admin"]);
        let t = doc.authenticate(&secret, 50).unwrap();
        assert_eq!(doc.decide(Some(t), "org/x", Level::Write), Decision::Allow);
        assert_eq!(
            doc.decide(Some(t), "org/ops", Level::Admin),
            Decision::Allow
        );
        assert!(
            matches!(doc.decide(Some(t), "org/x", Level::Admin), Decision::Forbidden(r) if r.contains("write access to org/x, admin is needed"))
        );
        assert!(
            matches!(doc.decide(Some(t), "org2/x", Level::Read), Decision::Forbidden(r) if r.contains("no access to org2/x"))
        );
        assert_eq!(
            doc.decide(None, "org/x", Level::Read),
            Decision::Unauthenticated
        );
        assert_eq!(
            doc.authenticate(&secret, 100).unwrap_err(),
            Rejected::Expired
        );
        assert_eq!(
            doc.authenticate("gitstow_nope", 50).unwrap_err(),
            Rejected::Unknown
        );
    }

    #[test]
    fn hidden_refs_add_up_by_pattern_and_stay_out_of_old_documents() {
        let mut doc = AccessDoc::default();
        let plain = serde_json::to_string(&doc).unwrap();
        assert!(!plain.contains("hidden"), "{plain}");
        let p = |s: &str| RepoPattern::parse(s).unwrap();
        assert!(!doc.hide_refs(p("*"), vec!["refs/pull".into()]).unwrap());
        assert!(!doc
            .hide_refs(p("gerrit/*"), vec!["refs/changes/".into()])
            .unwrap());
        assert_eq!(doc.hidden_refs("gerrit/x"), ["refs/pull", "refs/changes/"]);
        assert_eq!(doc.hidden_refs("org/x"), ["refs/pull"]);
        // Replacing and removing an entry.
        assert!(doc.hide_refs(p("*"), vec!["refs/mr".into()]).unwrap());
        assert_eq!(doc.hidden_refs("org/x"), ["refs/mr"]);
        assert!(doc.hide_refs(p("*"), vec![]).unwrap());
        assert!(doc.hidden_refs("org/x").is_empty());
        for bad in [
            "refs/",
            "refs",
            "heads/x",
            "refs/a..b",
            "refs/x*",
            "refs/a b",
            "",
        ] {
            assert!(doc.hide_refs(p("*"), vec![bad.into()]).is_err(), "{bad}");
        }
        let back = parse(&serde_json::to_vec(&doc).unwrap()).unwrap();
        assert_eq!(back, doc);
    }

    #[test]
    fn anonymous_read_and_no_tokens() {
        assert_eq!(
            AccessDoc::default().decide(None, "x", Level::Admin),
            Decision::Allow
        );
        let (mut doc, _) = doc_with(&["*:read"]);
        doc.anonymous_read
            .push(RepoPattern::parse("public/*").unwrap());
        assert_eq!(doc.decide(None, "public/x", Level::Read), Decision::Allow);
        assert_eq!(
            doc.decide(None, "public/x", Level::Write),
            Decision::Unauthenticated
        );
        assert_eq!(
            doc.decide(None, "private", Level::Read),
            Decision::Unauthenticated
        );
    }

    #[test]
    fn protections() {
        let mut doc = AccessDoc::default();
        assert_eq!(doc.protected_refs("x"), ["HEAD", "refs/tags/*"]);
        doc.protect(
            RepoPattern::parse("org/*").unwrap(),
            vec!["refs/heads/release/*".into()],
        )
        .unwrap();
        doc.protect(RepoPattern::parse("org/scratch").unwrap(), vec![])
            .unwrap();
        assert_eq!(doc.protected_refs("org/app"), ["refs/heads/release/*"]);
        assert!(doc.protected_refs("org/scratch").is_empty());
        assert_eq!(doc.protected_refs("other"), ["HEAD", "refs/tags/*"]);
        for bad in [
            "main",
            "refs/heads/*x",
            "refs/*/x",
            "refs/heads/a..b",
            "refs/heads/a b",
            "",
        ] {
            assert!(check_ref_pattern(bad).is_err(), "{bad:?}");
        }
        for good in [
            "HEAD",
            "refs/heads/main",
            "refs/tags/*",
            "refs/heads/release/*",
        ] {
            assert!(check_ref_pattern(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn tokens_names_and_revocation() {
        let (mut doc, secret) = doc_with(&["*:read"]);
        let json = serde_json::to_string(&doc).unwrap();
        assert!(
            !json.contains(&secret[crate::SECRET_PREFIX.len()..]),
            "the secret is not stored"
        );
        assert!(doc
            .add_token("ci", vec![Grant::parse("*:read").unwrap()], 0, None)
            .is_err());
        assert!(doc
            .add_token("bad name", vec![Grant::parse("*:read").unwrap()], 0, None)
            .is_err());
        assert!(doc.add_token("none", vec![], 0, None).is_err());
        assert!(Grant::parse("org/*").is_err() && Grant::parse("org/*:owner").is_err());
        assert!(doc.revoke("ci") && !doc.revoke("ci"));
        assert_eq!(doc.authenticate(&secret, 0).unwrap_err(), Rejected::Unknown);
        assert_eq!(parse(json.as_bytes()).unwrap().tokens.len(), 1);
        assert!(parse(br#"{"tokens": [], "surprise": 1}"#).is_err());
    }
}

//! The JSON of the LFS API (git-lfs `docs/api/batch.md`,
//! `docs/api/basic-transfers.md`), as `serde` types.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The media type of every LFS API request and answer.
pub const MEDIA_TYPE: &str = "application/vnd.git-lfs+json";

/// Objects a batch request may name; the client sends at most 100.
pub const MAX_OBJECTS: usize = 1000;

/// `POST …/info/lfs/objects/batch`.
#[derive(Debug, Clone, Deserialize)]
pub struct BatchRequest {
    /// `download` or `upload`.
    pub operation: String,
    /// Transfer adapters the client knows, in its order of preference;
    /// absent means `basic`.
    #[serde(default)]
    pub transfers: Option<Vec<String>>,
    /// The objects.
    pub objects: Vec<ObjectSpec>,
    /// The hash of the oids; absent means `sha256`.
    #[serde(default)]
    pub hash_algo: Option<String>,
}

/// One object of a request: oid and size in bytes.
#[derive(Debug, Clone, Deserialize)]
pub struct ObjectSpec {
    /// The oid as the client wrote it (checked per object).
    pub oid: String,
    /// Size in bytes (negative: refused per object).
    pub size: i64,
}

/// The answer to a batch request.
#[derive(Debug, Clone, Serialize)]
pub struct BatchResponse {
    /// The adapter chosen: `basic`.
    pub transfer: &'static str,
    /// One answer per requested object, in the request's order.
    pub objects: Vec<ObjectAnswer>,
    /// `sha256`.
    pub hash_algo: &'static str,
}

/// What the client is to do with one object: actions, an error, or
/// neither (an upload the server already has).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ObjectAnswer {
    /// The oid, as requested.
    pub oid: String,
    /// The size, as requested.
    pub size: i64,
    /// `true`: the actions carry their own authorization (the client adds
    /// no credentials).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authenticated: Option<bool>,
    /// Absent for an upload the repository already has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actions: Option<Actions>,
    /// Why this object cannot be transferred.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ObjectError>,
}

/// The actions of one object.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Actions {
    /// `PUT` the bytes here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upload: Option<Action>,
    /// Then `POST` `{oid, size}` here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<Action>,
    /// `GET` the bytes here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub download: Option<Action>,
}

/// One request the client makes: where, with which headers, until when.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Action {
    /// The URL.
    pub href: String,
    /// Headers to send with it.
    pub header: BTreeMap<String, String>,
    /// Seconds the action stays valid.
    pub expires_in: u64,
}

/// A per-object error: an HTTP-like code (404 missing, 410 removed, 422
/// invalid) and a message the client shows.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ObjectError {
    /// The code.
    pub code: u16,
    /// The message.
    pub message: String,
}

/// The body of an error answer (any status but 200).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What the client shows.
    pub message: String,
}

/// `POST` of a verify action.
#[derive(Debug, Clone, Deserialize)]
pub struct VerifyRequest {
    /// The oid uploaded.
    pub oid: String,
    /// Its size in bytes.
    pub size: i64,
}

//! Access levels.

use std::fmt;
use std::str::FromStr;

/// What a grant allows, each level including the ones below it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Clone, fetch, `ls-remote`.
    Read,
    /// Also push (fast-forwards, and anything outside protected refs) and
    /// create repositories by pushing to them.
    Write,
    /// Also the operator endpoints (granted on `*`); later (plan 0007 step
    /// 2) force-pushing and deleting protected refs, which `write` may do
    /// until protected refs exist.
    Admin,
}

impl Level {
    /// The level's name as written in grants (`read`, `write`, `admin`).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Read => "read",
            Level::Write => "write",
            Level::Admin => "admin",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Level {
    type Err = crate::Error;

    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "read" => Ok(Level::Read),
            "write" => Ok(Level::Write),
            "admin" => Ok(Level::Admin),
            other => Err(crate::Error::Invalid(format!(
                "unknown access level {other:?}: want read, write or admin"
            ))),
        }
    }
}

//! The retired list of a repository: containers no state names any more,
//! each with the time it stopped being named, kept until its grace period
//! ends and maintenance deletes it.
//!
//! It lives in its own object, `<repo>.git/retired` (zstd-compressed JSON
//! `{"format":1,"retired":[{"id":…,"since":…}]}`), updated only by
//! conditional PUTs, so that the state object — read by every request —
//! stays as small as the repository's refs and live containers, however
//! many containers maintenance has replaced within the grace period.
//!
//! Nothing reads it on a request path. A container enters it only after the
//! state stopped naming it (maintenance writes the state first, then this),
//! or when an orphan scan found it unnamed; a crash in between leaves an
//! unnamed container that the next scan adds. A listed container is never
//! named by a state again, except one an in-flight push uploaded before the
//! scan found it, which that push commits within the grace period; deletion
//! re-checks the current state first.

use serde::{Deserialize, Serialize};

/// A container no state names, held until `since` + the grace period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetiredContainer {
    /// The container's id.
    pub id: String,
    /// When it stopped being named (or was first found unnamed), in seconds
    /// since the Unix epoch.
    pub since: u64,
}

#[derive(Serialize, Deserialize)]
struct RetiredFile {
    format: u32,
    retired: Vec<RetiredContainer>,
}

/// Serializes the list to zstd-compressed JSON.
pub fn encode(list: &[RetiredContainer]) -> Vec<u8> {
    crate::state::encode_json(&RetiredFile {
        format: 1,
        retired: list.to_vec(),
    })
}

/// Decodes what [`encode`] wrote.
pub fn decode(bytes: &[u8]) -> Result<Vec<RetiredContainer>, crate::state::StateError> {
    let file: RetiredFile = crate::state::decode_json(bytes)?;
    if file.format != 1 {
        return Err(crate::state::StateError::UnknownFormat(file.format));
    }
    Ok(file.retired)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let list = vec![
            RetiredContainer {
                id: "ab".into(),
                since: 7,
            },
            RetiredContainer {
                id: "cd".into(),
                since: 1_700_000_000,
            },
        ];
        assert_eq!(decode(&encode(&list)).unwrap(), list);
        assert_eq!(decode(&encode(&[])).unwrap(), vec![]);
        assert!(decode(b"junk").is_err());
    }
}

//! Capability lists of protocol v0/v1, as gitprotocol-capabilities(5)
//! describes them: space-separated words, each a name or `name=value`, sent
//! after a NUL on the first ref line (server) or on the first want / command
//! line (client).

/// An ordered list of capabilities, each a name with an optional value
/// (gitprotocol-capabilities(5)). Duplicates are kept in order; lookups
/// return the first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities {
    entries: Vec<(String, Option<String>)>,
}

impl Capabilities {
    /// Parses space-separated `a b=c` (gitprotocol-capabilities(5)). Empty
    /// words (leading, trailing or doubled spaces, as git's client sends
    /// after the NUL: `"\0 report-status side-band-64k"`) and a trailing
    /// `'\n'` are ignored. The value is everything after the first `=`.
    /// Invalid UTF-8 is replaced (capabilities are ASCII in practice); this
    /// never fails.
    pub fn parse(text: &[u8]) -> Self {
        let text = text.strip_suffix(b"\n").unwrap_or(text);
        let entries = text
            .split(|&b| b == b' ')
            .filter(|word| !word.is_empty())
            .map(|word| {
                let word = String::from_utf8_lossy(word);
                match word.split_once('=') {
                    Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
                    None => (word.into_owned(), None),
                }
            })
            .collect();
        Capabilities { entries }
    }

    /// Whether a capability called `name` is present (with or without value).
    pub fn contains(&self, name: &str) -> bool {
        self.entries.iter().any(|(n, _)| n == name)
    }

    /// The value of the first capability called `name`, if it has one
    /// (`agent=git/2.47.3` gives `Some("git/2.47.3")`; a bare `thin-pack`
    /// gives `None`).
    pub fn value(&self, name: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
    }

    /// All capabilities in the order received.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        self.entries.iter().map(|(n, v)| (n.as_str(), v.as_deref()))
    }

    /// Number of capabilities.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Appends one capability.
    pub fn push(&mut self, name: impl Into<String>, value: Option<String>) {
        self.entries.push((name.into(), value));
    }

    /// Appends all capabilities of `other` (git accepts features on more
    /// than one command line and merges them).
    pub fn extend(&mut self, other: Capabilities) {
        self.entries.extend(other.entries);
    }
}

impl std::fmt::Display for Capabilities {
    /// The wire form: `name` or `name=value`, joined by single spaces.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (name, value)) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            f.write_str(name)?;
            if let Some(value) = value {
                write!(f, "={value}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_names_and_values() {
        let caps = Capabilities::parse(b" report-status side-band-64k  agent=git/2.47.3 symref=HEAD:refs/heads/main x=a=b empty=\n");
        assert_eq!(caps.len(), 6);
        assert!(caps.contains("report-status"));
        assert!(caps.contains("side-band-64k"));
        assert!(!caps.contains("side-band"));
        assert!(!caps.contains("agent=git/2.47.3"));
        assert_eq!(caps.value("agent"), Some("git/2.47.3"));
        assert_eq!(caps.value("symref"), Some("HEAD:refs/heads/main"));
        assert_eq!(caps.value("x"), Some("a=b"));
        assert_eq!(caps.value("empty"), Some(""));
        assert_eq!(caps.value("report-status"), None);
        assert_eq!(caps.value("missing"), None);
        assert_eq!(
            caps.iter().collect::<Vec<_>>(),
            vec![
                ("report-status", None),
                ("side-band-64k", None),
                ("agent", Some("git/2.47.3")),
                ("symref", Some("HEAD:refs/heads/main")),
                ("x", Some("a=b")),
                ("empty", Some("")),
            ]
        );
        assert_eq!(
            caps.to_string(),
            "report-status side-band-64k agent=git/2.47.3 symref=HEAD:refs/heads/main x=a=b empty="
        );
    }

    #[test]
    fn parse_empty_and_odd_input() {
        assert!(Capabilities::parse(b"").is_empty());
        assert!(Capabilities::parse(b"   \n").is_empty());
        let caps = Capabilities::parse(b"a\xffb c");
        assert_eq!(caps.len(), 2);
        assert!(caps.contains("c"));
    }

    #[test]
    fn duplicates_first_wins_and_extend() {
        let mut caps = Capabilities::parse(b"agent=one");
        caps.extend(Capabilities::parse(b"agent=two quiet"));
        caps.push("atomic", None);
        assert_eq!(caps.value("agent"), Some("one"));
        assert!(caps.contains("quiet"));
        assert!(caps.contains("atomic"));
        assert_eq!(caps.len(), 4);
    }
}

/// The protocol version a client asks for (gitprotocol-v2(5): `GIT_PROTOCOL`
/// over SSH, the `Git-Protocol` header over HTTP): colon-separated
/// `key[=value]` items, of which `version=N` counts; the highest version
/// asked for that the server speaks wins (git's
/// `determine_protocol_version_server`), v0 when none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum ProtocolVersion {
    /// gitprotocol-pack(5) without a version line.
    #[default]
    V0,
    /// As v0, the advertisement led by `version 1`.
    V1,
    /// gitprotocol-v2(5).
    V2,
}

impl ProtocolVersion {
    /// The version `value` (a `GIT_PROTOCOL` value) asks for.
    pub fn from_git_protocol(value: &str) -> ProtocolVersion {
        value
            .split(':')
            .filter_map(|item| match item.trim() {
                "version=1" => Some(ProtocolVersion::V1),
                "version=2" => Some(ProtocolVersion::V2),
                _ => None,
            })
            .max()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod version_tests {
    use super::ProtocolVersion;

    #[test]
    fn the_highest_version_asked_for_wins() {
        assert_eq!(ProtocolVersion::from_git_protocol(""), ProtocolVersion::V0);
        assert_eq!(
            ProtocolVersion::from_git_protocol("version=1"),
            ProtocolVersion::V1
        );
        assert_eq!(
            ProtocolVersion::from_git_protocol("version=2"),
            ProtocolVersion::V2
        );
        assert_eq!(
            ProtocolVersion::from_git_protocol("foo=bar:version=2:version=1"),
            ProtocolVersion::V2
        );
        assert_eq!(
            ProtocolVersion::from_git_protocol("version=3"),
            ProtocolVersion::V0
        );
    }
}

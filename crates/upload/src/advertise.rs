//! The refs both services advertise, built from a repository state.

use gitstow_odb::RepoState;
use gitstow_protocol::{AdvertisedRef, HiddenRefs};

/// Agent string sent as `agent=<this>`.
pub const AGENT: &str = concat!("gitstow/", env!("CARGO_PKG_VERSION"));

/// The refs of `state` in advertisement order: HEAD first (when `with_head`
/// and it resolves), then every ref not `hidden` sorted by name, with
/// peeled tag targets.
pub fn refs(state: &RepoState, with_head: bool, hidden: &HiddenRefs) -> Vec<AdvertisedRef> {
    let mut out = Vec::with_capacity(state.refs.len() + 1);
    if with_head {
        if let (Some(target), Some(oid)) = (&state.head, state.head_oid()) {
            out.push(AdvertisedRef {
                name: "HEAD".into(),
                oid,
                peeled: None,
                symref_target: Some(target.clone()),
            });
        }
    }
    for (name, oid) in hidden.visible(&state.refs, "") {
        out.push(AdvertisedRef {
            name: name.clone(),
            oid: *oid,
            peeled: state.peeled.get(name).copied(),
            symref_target: None,
        });
    }
    out
}

/// The refs under any of `prefixes` (all refs when empty), HEAD first when it
/// resolves and a prefix matches it, `hidden` ones left out. Each prefix is a
/// range scan of the sorted ref map, so a narrow prefix does not visit every
/// ref (nor a hidden namespace).
pub fn refs_with_prefixes(
    state: &RepoState,
    prefixes: &[String],
    hidden: &HiddenRefs,
) -> Vec<AdvertisedRef> {
    if prefixes.is_empty() {
        return refs(state, true, hidden);
    }
    let mut out = Vec::new();
    if prefixes.iter().any(|p| "HEAD".starts_with(p.as_str())) {
        if let (Some(target), Some(oid)) = (&state.head, state.head_oid()) {
            out.push(AdvertisedRef {
                name: "HEAD".into(),
                oid,
                peeled: None,
                symref_target: Some(target.clone()),
            });
        }
    }
    let mut names: Vec<&String> = Vec::new();
    for p in prefixes {
        names.extend(hidden.visible(&state.refs, p).map(|(name, _)| name));
    }
    names.sort_unstable();
    names.dedup();
    out.extend(names.into_iter().map(|name| AdvertisedRef {
        name: name.clone(),
        oid: state.refs[name],
        peeled: state.peeled.get(name).copied(),
        symref_target: None,
    }));
    out
}

/// Capabilities of a v0/v1 upload-pack advertisement.
pub fn upload_pack_v0_capabilities(state: &RepoState) -> Vec<String> {
    let mut caps: Vec<String> = [
        "multi_ack",
        "thin-pack",
        "side-band",
        "side-band-64k",
        "ofs-delta",
        "no-progress",
        "include-tag",
        "shallow",
        "deepen-since",
        "deepen-not",
        "deepen-relative",
        "filter",
        "multi_ack_detailed",
        "no-done",
        "allow-tip-sha1-in-want",
        "allow-reachable-sha1-in-want",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let (Some(target), Some(_)) = (&state.head, state.head_oid()) {
        caps.push(format!("symref=HEAD:{target}"));
    }
    caps.push("object-format=sha1".into());
    caps.push(format!("agent={AGENT}"));
    caps
}

/// Capabilities of the v2 advertisement (gitprotocol-v2(5)).
pub fn upload_pack_v2_capabilities() -> Vec<String> {
    vec![
        format!("agent={AGENT}"),
        "ls-refs=unborn".into(),
        "fetch=shallow wait-for-done filter".into(),
        "server-option".into(),
        "object-format=sha1".into(),
    ]
}

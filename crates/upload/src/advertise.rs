//! The refs both services advertise, built from a repository state.

use gitstow_odb::reftable::RefValue;
use gitstow_odb::{Refs, RepoState};
use gitstow_protocol::{AdvertisedRef, HiddenRefs};

/// Agent string sent as `agent=<this>`.
pub const AGENT: &str = concat!("gitstow/", env!("CARGO_PKG_VERSION"));

/// Calls `f` with every ref of `refs` under `from` (all of them when
/// empty) in name order, hidden ones left out: a hidden namespace is
/// skipped with one seek past it, not visited ref by ref.
///
/// # Errors
/// The refs could not be read.
pub fn visible(
    refs: &Refs<'_>,
    from: &str,
    hidden: &HiddenRefs,
    mut f: impl FnMut(&str, RefValue),
) -> gitstow_odb::Result<()> {
    let mut walk = refs.walk(from)?;
    loop {
        let skip = match walk.next()? {
            None => return Ok(()),
            Some((name, value)) => match hidden.hiding(name) {
                None => {
                    f(name, value);
                    None
                }
                // Below the prefix: every name up to `<prefix>0`.
                Some(prefix) if name.len() > prefix.len() => Some(format!("{prefix}0")),
                Some(_) => None,
            },
        };
        if let Some(target) = skip {
            walk.skip_to(target.as_bytes())?;
        }
    }
}

fn advertised(name: &str, value: RefValue) -> Option<AdvertisedRef> {
    Some(AdvertisedRef {
        name: name.to_owned(),
        oid: value.oid()?,
        peeled: value.peeled(),
        symref_target: None,
    })
}

/// HEAD as advertised: its target and oid, when it resolves.
fn head(state: &RepoState, refs: &Refs<'_>) -> gitstow_odb::Result<Option<AdvertisedRef>> {
    let (Some(target), Some(oid)) = (&state.head, refs.head_oid(state.head.as_deref())?) else {
        return Ok(None);
    };
    Ok(Some(AdvertisedRef {
        name: "HEAD".into(),
        oid,
        peeled: None,
        symref_target: Some(target.clone()),
    }))
}

/// The refs of `state` (read through `refs`) in advertisement order: HEAD
/// first (when `with_head` and it resolves), then every ref not `hidden`
/// sorted by name, with peeled tag targets.
///
/// # Errors
/// The refs could not be read.
pub fn refs(
    state: &RepoState,
    refs: &Refs<'_>,
    with_head: bool,
    hidden: &HiddenRefs,
) -> gitstow_odb::Result<Vec<AdvertisedRef>> {
    let mut out = Vec::with_capacity(usize::try_from(refs.len()).unwrap_or(0).saturating_add(1));
    if with_head {
        out.extend(head(state, refs)?);
    }
    visible(refs, "", hidden, |name, value| {
        out.extend(advertised(name, value))
    })?;
    Ok(out)
}

/// The refs under any of `prefixes` (all refs when empty), HEAD first when it
/// resolves and a prefix matches it, `hidden` ones left out. Each prefix is a
/// seek in the refs, so a narrow prefix does not visit every ref (nor a
/// hidden namespace).
///
/// # Errors
/// The refs could not be read.
pub fn refs_with_prefixes(
    state: &RepoState,
    view: &Refs<'_>,
    prefixes: &[String],
    hidden: &HiddenRefs,
) -> gitstow_odb::Result<Vec<AdvertisedRef>> {
    if prefixes.is_empty() {
        return refs(state, view, true, hidden);
    }
    let mut out = Vec::new();
    if prefixes.iter().any(|p| "HEAD".starts_with(p.as_str())) {
        out.extend(head(state, view)?);
    }
    // A prefix that another one covers adds nothing: walk the others.
    let mut walked: Vec<&String> = prefixes.iter().collect();
    walked.sort_unstable();
    walked.dedup_by(|later, earlier| later.starts_with(earlier.as_str()));
    for p in walked {
        visible(view, p, hidden, |name, value| {
            out.extend(advertised(name, value))
        })?;
    }
    Ok(out)
}

/// Capabilities of a v0/v1 upload-pack advertisement (`symref=HEAD:…`
/// when HEAD resolves: `head_resolves`).
pub fn upload_pack_v0_capabilities(state: &RepoState, head_resolves: bool) -> Vec<String> {
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
    if let (Some(target), true) = (&state.head, head_resolves) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use gitstow_odb::RefSet;

    #[test]
    fn hidden_namespaces_are_skipped() {
        let names = [
            "refs/changes",
            "refs/changes-x",
            "refs/changes.y",
            "refs/changes/01/1/1",
            "refs/changes/99/99/2",
            "refs/changes0",
            "refs/heads/main",
            "refs/pull/1/head",
            "refs/tags/v1",
        ];
        let mut set = RefSet::default();
        for n in names {
            set.insert(n, gix_hash::ObjectId::null(gix_hash::Kind::Sha1));
        }
        let view = Refs::inline(&set);
        let h = HiddenRefs::new(&["refs/changes", "refs/pull"]).unwrap();
        let seen = |from: &str, h: &HiddenRefs| {
            let mut out = Vec::new();
            visible(&view, from, h, |n, _| out.push(n.to_owned())).unwrap();
            out
        };
        assert_eq!(
            seen("", &h),
            [
                "refs/changes-x",
                "refs/changes.y",
                "refs/changes0",
                "refs/heads/main",
                "refs/tags/v1"
            ]
        );
        assert_eq!(
            seen("refs/changes", &h),
            ["refs/changes-x", "refs/changes.y", "refs/changes0"]
        );
        assert_eq!(seen("", &HiddenRefs::default()).len(), names.len());
        let state = RepoState {
            head: Some("refs/heads/main".into()),
            refs: set.clone(),
            ..Default::default()
        };
        let prefixes = [
            "refs/tags/".to_owned(),
            "refs/".to_owned(),
            "HEAD".to_owned(),
        ];
        let listed = refs_with_prefixes(&state, &view, &prefixes, &h).unwrap();
        let listed: Vec<&str> = listed.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(listed[0], "HEAD");
        assert_eq!(listed.len(), 6, "refs/tags/ is inside refs/: listed once");
    }
}

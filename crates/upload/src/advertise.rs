//! The refs both services advertise, built from a repository state.

use std::io::Write;

use gitstow_odb::reftable::RefValue;
use gitstow_odb::{Refs, RepoState};
use gitstow_protocol::{HiddenRefs, LsRefs, LsRefsArgs, Service, V0Refs};
use gix_hash::ObjectId;

/// Agent string sent as `agent=<this>`.
pub const AGENT: &str = concat!("gitstow/", env!("CARGO_PKG_VERSION"));

/// Calls `f` with every ref of `refs` under `from` (all of them when
/// empty) in name order, hidden ones left out: a hidden namespace is
/// skipped with one seek past it, not visited ref by ref. `f`'s error
/// (a write to the client) ends the walk.
///
/// # Errors
/// The refs could not be read, or `f` failed.
pub fn visible(
    refs: &Refs<'_>,
    from: &str,
    hidden: &HiddenRefs,
    mut f: impl FnMut(&str, RefValue) -> std::io::Result<()>,
) -> gitstow_odb::Result<()> {
    let mut walk = refs.walk(from)?;
    loop {
        let skip = match walk.next()? {
            None => return Ok(()),
            Some((name, value)) => match hidden.hiding(name) {
                None => {
                    f(name, value)?;
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

/// HEAD as advertised: its target and oid, when it resolves.
///
/// # Errors
/// The refs could not be read.
pub fn head<'s>(
    state: &'s RepoState,
    refs: &Refs<'_>,
) -> gitstow_odb::Result<Option<(&'s str, ObjectId)>> {
    let (Some(target), Some(oid)) = (&state.head, refs.head_oid(state.head.as_deref())?) else {
        return Ok(None);
    };
    Ok(Some((target.as_str(), oid)))
}

/// What comes before a v0 advertisement's refs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lead {
    /// Smart HTTP's `# service=<service>` pkt-line and its flush
    /// (gitprotocol-http(5)); none over SSH.
    pub http_header: bool,
    /// A `version 1` line (the client asked for protocol v1).
    pub version1: bool,
}

/// Writes the v0 advertisement of `service` (gitprotocol-pack(5)
/// "Reference Discovery", after what `lead` asks for) to `w` as the refs
/// are read: `head` first (its target and oid, from
/// [`head`]; upload-pack only), then every ref not `hidden` by name, with
/// peeled tag targets for upload-pack. Nothing is held but a line and a
/// 64 KiB batch, however many refs there are.
///
/// # Errors
/// The refs could not be read, or writing failed.
pub fn write_v0(
    w: &mut impl Write,
    service: Service,
    refs: &Refs<'_>,
    head: Option<(&str, ObjectId)>,
    capabilities: &[String],
    hidden: &HiddenRefs,
    lead: Lead,
) -> gitstow_odb::Result<()> {
    let mut out = V0Refs::new(w, service, capabilities, lead.http_header, lead.version1)?;
    if let Some((_, oid)) = head {
        out.push("HEAD", &oid, None)?;
    }
    visible(refs, "", hidden, |name, value| match value.oid() {
        Some(oid) => out.push(name, &oid, value.peeled().as_ref()),
        None => Ok(()),
    })?;
    Ok(out.finish()?)
}

/// Writes the answer to an `ls-refs` command (gitprotocol-v2(5)) to `w`
/// as the refs are read: the refs under any of `args`' prefixes (all refs
/// when none), HEAD first when it resolves and a prefix matches it (or
/// `unborn HEAD` as `args` ask), `hidden` ones left out. Each prefix is a
/// seek in the refs, so a narrow prefix does not visit every ref (nor a
/// hidden namespace); a prefix another one covers is not walked again.
///
/// # Errors
/// The refs could not be read, or writing failed.
pub fn write_ls_refs(
    w: &mut impl Write,
    args: &LsRefsArgs,
    state: &RepoState,
    refs: &Refs<'_>,
    hidden: &HiddenRefs,
) -> gitstow_odb::Result<()> {
    let head = if args.matches("HEAD") {
        head(state, refs)?
    } else {
        None
    };
    let unborn = match (&state.head, head) {
        (Some(target), None) if args.unborn && refs.oid(target)?.is_none() => Some(target.as_str()),
        _ => None,
    };
    let mut out = LsRefs::new(w, args, unborn)?;
    if let Some((target, oid)) = head {
        out.push("HEAD", &oid, None, Some(target))?;
    }
    let mut walked: Vec<&str> = args.ref_prefixes.iter().map(String::as_str).collect();
    if walked.is_empty() {
        walked.push("");
    }
    walked.sort_unstable();
    walked.dedup_by(|later, earlier| later.starts_with(*earlier));
    for p in walked {
        visible(refs, p, hidden, |name, value| match value.oid() {
            Some(oid) => out.push(name, &oid, value.peeled().as_ref(), None),
            None => Ok(()),
        })?;
    }
    Ok(out.finish()?)
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
    caps.push(format!("object-format={}", state.object_format));
    caps.push(format!("agent={AGENT}"));
    caps
}

/// Capabilities of the v2 advertisement (gitprotocol-v2(5)) of a
/// repository of object format `format`.
pub fn upload_pack_v2_capabilities(format: gix_hash::Kind) -> Vec<String> {
    vec![
        format!("agent={AGENT}"),
        "ls-refs=unborn".into(),
        "fetch=shallow wait-for-done filter".into(),
        "server-option".into(),
        format!("object-format={format}"),
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
            visible(&view, from, h, |n, _| {
                out.push(n.to_owned());
                Ok(())
            })
            .unwrap();
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
        let args = LsRefsArgs {
            ref_prefixes: vec!["refs/tags/".into(), "refs/".into(), "HEAD".into()],
            symrefs: true,
            ..Default::default()
        };
        let mut out = Vec::new();
        write_ls_refs(&mut out, &args, &state, &view, &h).unwrap();
        let text = String::from_utf8(out).unwrap();
        let listed: Vec<&str> = text.lines().filter_map(|l| l.split(' ').nth(1)).collect();
        assert_eq!(listed[0], "HEAD");
        assert!(text.contains("symref-target:refs/heads/main"), "{text}");
        assert_eq!(listed.len(), 6, "refs/tags/ is inside refs/: listed once");
        assert!(text.ends_with("0000"), "{text}");
    }
}

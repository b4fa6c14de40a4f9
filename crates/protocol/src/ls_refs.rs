//! The v2 `ls-refs` command (gitprotocol-v2(5) "ls-refs"): its arguments
//! and its answer, written as the refs come.

use std::io::{self, Write};

use gix_hash::ObjectId;

use crate::advertisement::{AdvertisedRef, RefLine};
use crate::fetch::FetchError;
use crate::pktline::PktBatch;

/// Arguments of a v2 `ls-refs` command (gitprotocol-v2(5) "ls-refs").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LsRefsArgs {
    /// `peel`: show `peeled:<oid>` for annotated tags.
    pub peel: bool,
    /// `symrefs`: show `symref-target:<target>` for symbolic refs.
    pub symrefs: bool,
    /// `unborn`: show an unborn `HEAD` (needs `symrefs` too, as in git).
    pub unborn: bool,
    /// `ref-prefix <prefix>`: only refs starting with one of these; empty
    /// means all refs.
    pub ref_prefixes: Vec<String>,
}

/// More `ref-prefix` lines than this and git's ls-refs ignores them all
/// and lists every ref (`TOO_MANY_PREFIXES` in ls-refs.c).
const TOO_MANY_PREFIXES: usize = 65536;

impl LsRefsArgs {
    /// Parses the argument lines of `ls-refs` (gitprotocol-v2(5)): `peel`,
    /// `symrefs`, `unborn`, `ref-prefix <prefix>`. An unknown line is an
    /// error naming it, like git's "unexpected line: '…'". A trailing
    /// `'\n'` on a line is ignored. More than 65536 prefixes clear the list
    /// (all refs match), as git does.
    pub fn parse<A: AsRef<[u8]>>(args: impl IntoIterator<Item = A>) -> Result<Self, FetchError> {
        let mut out = LsRefsArgs::default();
        for arg in args {
            let arg = arg.as_ref();
            let line = arg.strip_suffix(b"\n").unwrap_or(arg);
            match line {
                b"peel" => out.peel = true,
                b"symrefs" => out.symrefs = true,
                b"unborn" => out.unborn = true,
                _ => match line.strip_prefix(b"ref-prefix ") {
                    Some(prefix) => {
                        let prefix =
                            std::str::from_utf8(prefix).map_err(|_| FetchError::NotUtf8 {
                                line: crate::lossy(line),
                            })?;
                        out.ref_prefixes.push(prefix.to_owned());
                    }
                    None => {
                        return Err(FetchError::UnexpectedLine {
                            line: crate::lossy(line),
                        })
                    }
                },
            }
        }
        if out.ref_prefixes.len() > TOO_MANY_PREFIXES {
            out.ref_prefixes.clear();
        }
        Ok(out)
    }

    /// does a ref name pass the prefixes (none = all)
    pub fn matches(&self, name: &str) -> bool {
        self.ref_prefixes.is_empty()
            || self
                .ref_prefixes
                .iter()
                .any(|p| name.starts_with(p.as_str()))
    }
}

/// ls-refs output: `<oid> <name>[ symref-target:<t>][ peeled:<oid>]` per
/// ref, then flush (gitprotocol-v2(5) "ls-refs"). `unborn_head`:
/// `Some(target)` when HEAD points to a branch that does not exist yet and
/// `args.unborn` → `unborn HEAD symref-target:<t>`.
///
/// As git's ls-refs does: refs not matching `args` prefixes are skipped;
/// `symref-target` needs `args.symrefs`, `peeled` needs `args.peel`; the
/// unborn line is written first and only when `args.unborn`,
/// `args.symrefs` and the prefixes admit `HEAD` (git 2.47 sends nothing for
/// an unborn HEAD without `symrefs`). `refs` are written in the order given.
pub fn write_ls_refs(
    w: &mut impl Write,
    args: &LsRefsArgs,
    refs: &[AdvertisedRef],
    unborn_head: Option<&str>,
) -> io::Result<()> {
    let mut out = LsRefs::new(w, args, unborn_head)?;
    for r in refs.iter().filter(|r| args.matches(&r.name)) {
        out.push(
            &r.name,
            &r.oid,
            r.peeled.as_ref(),
            r.symref_target.as_deref(),
        )?;
    }
    out.finish()
}

/// An `ls-refs` answer written as the refs come (gitprotocol-v2(5)
/// "ls-refs"), holding one line and a 64 KiB batch. The caller passes only
/// refs its prefixes match (see [`write_ls_refs`] for the rules).
pub struct LsRefs<'w, 'a, W: Write> {
    batch: PktBatch<'w, W>,
    args: &'a LsRefsArgs,
    line: RefLine,
}

impl<'w, 'a, W: Write> LsRefs<'w, 'a, W> {
    /// Starts the answer to `args`: the `unborn HEAD` line first when
    /// HEAD is unborn (`unborn_head`: its target) and `args` ask for it.
    ///
    /// # Errors
    /// Writing failed.
    pub fn new(w: &'w mut W, args: &'a LsRefsArgs, unborn_head: Option<&str>) -> io::Result<Self> {
        let mut batch = PktBatch::new(w);
        if let Some(target) = unborn_head {
            if args.unborn && args.symrefs && args.matches("HEAD") {
                batch.text(&format!("unborn HEAD symref-target:{target}"))?;
            }
        }
        Ok(LsRefs {
            batch,
            args,
            line: RefLine::default(),
        })
    }

    /// The next ref: `<oid> <name>[ symref-target:<t>][ peeled:<oid>]`,
    /// the attributes as `args` ask.
    ///
    /// # Errors
    /// Writing failed, or the line exceeds the pkt-line limit.
    pub fn push(
        &mut self,
        name: &str,
        oid: &ObjectId,
        peeled: Option<&ObjectId>,
        symref_target: Option<&str>,
    ) -> io::Result<()> {
        self.line.start(oid, name);
        if let (true, Some(target)) = (self.args.symrefs, symref_target) {
            self.line.text.push_str(" symref-target:");
            self.line.text.push_str(target);
        }
        if let (true, Some(peeled)) = (self.args.peel, peeled) {
            self.line.text.push_str(" peeled:");
            self.line.push_oid(peeled);
        }
        self.batch.text(&self.line.text)
    }

    /// Ends the answer (flush-pkt) and writes what is batched.
    ///
    /// # Errors
    /// Writing failed.
    pub fn finish(mut self) -> io::Result<()> {
        self.batch.special(b"0000")?;
        self.batch.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advertisement::tests::{oid, packets};
    use crate::pktline::Packet;

    const GIT_LS_REFS: &[u8] = include_bytes!("../tests/fixtures/ls_refs.pkt");
    const GIT_LS_REFS_PREFIX: &[u8] = include_bytes!("../tests/fixtures/ls_refs_prefix.pkt");
    const GIT_LS_REFS_UNBORN: &[u8] = include_bytes!("../tests/fixtures/ls_refs_unborn.pkt");

    /// Parses git's ls-refs output back into refs (and the unborn target).
    fn parse_ls_refs(bytes: &[u8]) -> (Vec<AdvertisedRef>, Option<String>) {
        let ps = packets(bytes);
        assert_eq!(ps.last(), Some(&Packet::Flush));
        let mut refs = Vec::new();
        let mut unborn = None;
        for p in &ps[..ps.len() - 1] {
            let line = std::str::from_utf8(p.as_data().unwrap()).unwrap();
            let line = line.strip_suffix('\n').expect("ls-refs lines end in LF");
            let mut words = line.split(' ');
            let (first, name) = (words.next().unwrap(), words.next().unwrap());
            let mut r = AdvertisedRef {
                name: name.into(),
                oid: gix_hash::Kind::Sha1.null(),
                peeled: None,
                symref_target: None,
            };
            for attr in words {
                if let Some(t) = attr.strip_prefix("symref-target:") {
                    r.symref_target = Some(t.into());
                } else if let Some(p) = attr.strip_prefix("peeled:") {
                    r.peeled = Some(oid(p));
                } else {
                    panic!("unknown attribute {attr}");
                }
            }
            if first == "unborn" {
                unborn = r.symref_target;
            } else {
                r.oid = oid(first);
                refs.push(r);
            }
        }
        (refs, unborn)
    }

    /// The refs of the ls-refs fixture (the repository at capture time).
    fn ls_refs_repo() -> Vec<AdvertisedRef> {
        let (refs, unborn) = parse_ls_refs(GIT_LS_REFS);
        assert!(unborn.is_none());
        assert_eq!(refs[0].name, "HEAD");
        assert!(refs[0].symref_target.is_some());
        assert!(refs.iter().any(|r| r.peeled.is_some()));
        refs
    }

    fn args(lines: &[&str]) -> LsRefsArgs {
        LsRefsArgs::parse(lines.iter().map(|l| l.as_bytes())).unwrap()
    }

    #[test]
    fn ls_refs_matches_git() {
        let refs = ls_refs_repo();
        let mut out = Vec::new();
        write_ls_refs(&mut out, &args(&["symrefs", "peel", "unborn"]), &refs, None).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(GIT_LS_REFS)
        );

        let mut out = Vec::new();
        let a = args(&["symrefs", "peel", "unborn", "ref-prefix refs/tags/"]);
        write_ls_refs(&mut out, &a, &refs, None).unwrap();
        assert_eq!(out, GIT_LS_REFS_PREFIX);

        let mut out = Vec::new();
        write_ls_refs(
            &mut out,
            &args(&["symrefs", "peel", "unborn"]),
            &[],
            Some("refs/heads/main"),
        )
        .unwrap();
        assert_eq!(out, GIT_LS_REFS_UNBORN);
    }

    #[test]
    fn ls_refs_without_options() {
        let refs = ls_refs_repo();
        let mut out = Vec::new();
        write_ls_refs(
            &mut out,
            &args(&["ref-prefix HEAD", "ref-prefix refs/tags/v"]),
            &refs,
            None,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "0032026a191405ac2b3ef86990d0ef907000cd1df7a5 HEAD\n\
             003acd2c4c5c6240a5bf7c20d6d4bf0e20abb37d8a49 refs/tags/v1\n0000"
        );
        // unborn needs symrefs (git 2.47 sends nothing), and a HEAD-admitting prefix
        for lines in [
            &["unborn"][..],
            &["unborn", "symrefs", "ref-prefix refs/heads/"],
        ] {
            let mut out = Vec::new();
            write_ls_refs(&mut out, &args(lines), &[], Some("refs/heads/main")).unwrap();
            assert_eq!(out, b"0000", "{lines:?}");
        }
        let mut out = Vec::new();
        write_ls_refs(&mut out, &args(&["symrefs"]), &[], Some("refs/heads/main")).unwrap();
        assert_eq!(out, b"0000", "no unborn line without the unborn argument");
    }

    #[test]
    fn ls_refs_args_parse() {
        let a = args(&[
            "peel\n",
            "symrefs",
            "unborn",
            "ref-prefix refs/heads/\n",
            "ref-prefix HEAD",
        ]);
        assert_eq!(
            a,
            LsRefsArgs {
                peel: true,
                symrefs: true,
                unborn: true,
                ref_prefixes: vec!["refs/heads/".into(), "HEAD".into()]
            }
        );
        assert!(a.matches("refs/heads/x"));
        assert!(a.matches("HEAD"));
        assert!(!a.matches("refs/tags/x"));
        assert!(LsRefsArgs::default().matches("anything"));

        let err = LsRefsArgs::parse(&[b"bogus".to_vec()]).unwrap_err();
        assert!(matches!(&err, FetchError::UnexpectedLine { line } if line == "bogus"));
        assert_eq!(err.to_string(), "unexpected line: 'bogus'");
        assert!(LsRefsArgs::parse(&[b"ref-prefix \xff".to_vec()]).is_err());
        assert!(LsRefsArgs::parse(&[b"peel extra".to_vec()]).is_err());

        let many: Vec<Vec<u8>> = (0..=TOO_MANY_PREFIXES)
            .map(|i| format!("ref-prefix p{i}").into_bytes())
            .collect();
        let a = LsRefsArgs::parse(&many).unwrap();
        assert!(a.ref_prefixes.is_empty());
        assert!(a.matches("refs/anything"));
    }
}

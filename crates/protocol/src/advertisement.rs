//! What the server says first: the v0/v1 ref advertisement
//! (gitprotocol-pack(5) "Reference Discovery", gitprotocol-http(5) "Smart
//! Clients"), the v2 capability advertisement (gitprotocol-v2(5)
//! "Capability Advertisement"); the v2 `ls-refs` command is in
//! [`crate::ls_refs`].
//!
//! Facts confirmed against git 2.47 `git http-backend`:
//!
//! - v0 `GET info/refs?service=git-upload-pack`: `# service=git-upload-pack`
//!   pkt, flush, `HEAD` first with `\0<caps>` (caps include
//!   `symref=HEAD:refs/heads/main`), the other refs sorted, each annotated
//!   tag followed by `<peeled> <name>^{}`, flush.
//! - receive-pack advertises no `HEAD` and no peeled `^{}` lines.
//! - An empty repository: `<40 zeros> capabilities^{}\0<caps>`; no symref
//!   capability for an unborn HEAD.
//! - `Git-Protocol: version=2`: **no** `# service=` header and no flush
//!   before `version 2` (http-backend only writes the header when the
//!   protocol is not v2). git's client accepts both forms.
//! - `Git-Protocol: version=1`: header, flush, `version 1`, then the v0 refs.
//! - receive-pack does not speak v2: with `version=2` http-backend still
//!   omits the header but receive-pack answers a v0 advertisement. git's
//!   client never asks for v2 on push (remote-curl downgrades to v0).

use std::io::{self, Write};

use gix_hash::ObjectId;

use crate::pktline::PktBatch;

/// The two smart-HTTP services (gitprotocol-http(5)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// `git-upload-pack`: fetch and clone.
    UploadPack,
    /// `git-receive-pack`: push.
    ReceivePack,
}

impl Service {
    /// The service name as in `?service=` and the `# service=` line,
    /// e.g. `"git-upload-pack"` (gitprotocol-http(5)).
    pub fn name(&self) -> &'static str {
        match self {
            Service::UploadPack => "git-upload-pack",
            Service::ReceivePack => "git-receive-pack",
        }
    }

    /// The service for `"git-upload-pack"` or `"git-receive-pack"`; `None`
    /// for anything else (gitprotocol-http(5)).
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "git-upload-pack" => Some(Service::UploadPack),
            "git-receive-pack" => Some(Service::ReceivePack),
            _ => None,
        }
    }

    /// Content-Type of the `info/refs` answer,
    /// `application/x-git-upload-pack-advertisement` (gitprotocol-http(5)
    /// "Smart Server Response"; git http-backend sends it for v2 too).
    pub fn advertisement_content_type(&self) -> &'static str {
        match self {
            Service::UploadPack => "application/x-git-upload-pack-advertisement",
            Service::ReceivePack => "application/x-git-receive-pack-advertisement",
        }
    }

    /// Content-Type of the POST request body,
    /// `application/x-git-upload-pack-request` (gitprotocol-http(5)).
    pub fn request_content_type(&self) -> &'static str {
        match self {
            Service::UploadPack => "application/x-git-upload-pack-request",
            Service::ReceivePack => "application/x-git-receive-pack-request",
        }
    }

    /// Content-Type of the POST response,
    /// `application/x-git-upload-pack-result` (gitprotocol-http(5)).
    pub fn result_content_type(&self) -> &'static str {
        match self {
            Service::UploadPack => "application/x-git-upload-pack-result",
            Service::ReceivePack => "application/x-git-receive-pack-result",
        }
    }
}

/// One advertised ref (gitprotocol-pack(5) "Reference Discovery",
/// gitprotocol-v2(5) "ls-refs").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdvertisedRef {
    /// The full name, e.g. `HEAD` or `refs/heads/main`.
    pub name: String,
    /// The object the ref points at (for a symref: what its target points at).
    pub oid: ObjectId,
    /// for annotated tags: the peeled (non-tag) object
    pub peeled: Option<ObjectId>,
    /// for symbolic refs (HEAD): the target ref name
    pub symref_target: Option<String>,
}

/// `symref=<name>:<target>` for every ref in `refs` that has a
/// `symref_target`, in order: the capabilities git's upload-pack adds to a
/// v0 advertisement (gitprotocol-capabilities(5) "symref"). The caller puts
/// them into the capability list it passes to [`write_v0_advertisement`]
/// (git places them after `no-done` and before `object-format`).
pub fn symref_capabilities(refs: &[AdvertisedRef]) -> Vec<String> {
    refs.iter()
        .filter_map(|r| {
            r.symref_target
                .as_ref()
                .map(|t| format!("symref={}:{}", r.name, t))
        })
        .collect()
}

fn write_service_header(batch: &mut PktBatch<'_, impl Write>, service: Service) -> io::Result<()> {
    batch.text(&format!("# service={}", service.name()))?;
    batch.special(b"0000")
}

/// One advertisement line at a time in one buffer, oids written as hex in
/// place: 100,000 refs are 100,000 lines, and a `format!` per line was most
/// of their cost.
pub(crate) struct RefLine {
    pub(crate) text: String,
    /// Room for a SHA-256 oid's hex (a SHA-1 one uses 40 of it).
    hex: [u8; 64],
}

impl Default for RefLine {
    fn default() -> Self {
        RefLine {
            text: String::new(),
            hex: [0; 64],
        }
    }
}

impl RefLine {
    /// Starts the line `<oid> <name>`; the caller may append to `text`.
    pub(crate) fn start(&mut self, oid: &ObjectId, name: &str) {
        self.text.clear();
        self.push_oid(oid);
        self.text.push(' ');
        self.text.push_str(name);
    }

    /// Appends `oid` in hex.
    pub(crate) fn push_oid(&mut self, oid: &ObjectId) {
        self.text.push_str(oid.hex_to_buf(&mut self.hex));
    }
}

/// A v0/v1 ref advertisement written as the refs come (gitprotocol-pack(5)
/// "Reference Discovery"): nothing is held but one line and a 64 KiB
/// batch, so a listing of millions of refs never builds their list.
/// Made by [`V0Refs::new`] (or [`write_v0_advertisement`] for a slice);
/// [`V0Refs::finish`] ends it (with the `capabilities^{}` line if no ref
/// was pushed).
pub struct V0Refs<'w, W: Write> {
    batch: PktBatch<'w, W>,
    service: Service,
    caps: String,
    first: bool,
    line: RefLine,
}

impl<'w, W: Write> V0Refs<'w, W> {
    /// Starts the advertisement of `service` on `w`: with `http_header`,
    /// the `# service=` pkt and its flush; with `version1`, a `version 1`
    /// pkt. `capabilities` go on the first ref line.
    ///
    /// # Errors
    /// Writing to `w` failed.
    pub fn new(
        w: &'w mut W,
        service: Service,
        capabilities: &[String],
        http_header: bool,
        version1: bool,
    ) -> io::Result<Self> {
        let mut batch = PktBatch::new(w);
        if http_header {
            write_service_header(&mut batch, service)?;
        }
        if version1 {
            batch.text("version 1")?;
        }
        Ok(V0Refs {
            batch,
            service,
            caps: capabilities.join(" "),
            first: true,
            line: RefLine::default(),
        })
    }

    /// The next ref (refs in advertisement order: `HEAD` first, then by
    /// name); `peeled` (an annotated tag's target) is written as
    /// `<oid> <name>^{}` for upload-pack only, as git's receive-pack
    /// advertises none.
    ///
    /// # Errors
    /// Writing failed, or the line exceeds the pkt-line limit
    /// (`InvalidInput`).
    pub fn push(
        &mut self,
        name: &str,
        oid: &ObjectId,
        peeled: Option<&ObjectId>,
    ) -> io::Result<()> {
        self.line.start(oid, name);
        if self.first {
            self.first = false;
            self.line.text.push('\0');
            self.line.text.push_str(&self.caps);
        }
        self.batch.text(&self.line.text)?;
        if let (Service::UploadPack, Some(peeled)) = (self.service, peeled) {
            self.line.start(peeled, name);
            self.line.text.push_str("^{}");
            self.batch.text(&self.line.text)?;
        }
        Ok(())
    }

    /// Ends the advertisement (flush-pkt) and writes what is batched.
    ///
    /// # Errors
    /// Writing failed.
    pub fn finish(mut self) -> io::Result<()> {
        if self.first {
            // The zero id of the advertised object format (64 zeros for SHA-256).
            let zero = crate::advertised_format(&self.caps).null();
            let line = format!("{zero} capabilities^{{}}\0{}", self.caps);
            self.batch.text(&line)?;
        }
        self.batch.special(b"0000")?;
        self.batch.finish()
    }
}

/// The smart-HTTP v0 advertisement, as git http-backend sends it
/// (gitprotocol-http(5) "Smart Clients", gitprotocol-pack(5) "Reference
/// Discovery"): `# service=<name>\n` pkt, flush, then the refs: the first
/// ref line carries `\0<caps>` (caps joined by ' '); HEAD first if present;
/// peeled tags as `<oid> <name>^{}`; an empty list gives
/// `<zero-oid> capabilities^{}\0<caps>`; then flush. `http_header` false
/// omits the `# service` + flush prefix (for git:// or ssh style). Refs are written in
/// the order given (caller sorts).
///
/// Capabilities are written exactly as given; add
/// [`symref_capabilities`] for `HEAD` yourself. Peeled lines are written
/// for [`Service::UploadPack`] only: git's receive-pack advertises none.
/// Fails with `InvalidInput` if a line exceeds the pkt-line limit.
pub fn write_v0_advertisement(
    w: &mut impl Write,
    service: Service,
    refs: &[AdvertisedRef],
    capabilities: &[String],
    http_header: bool,
) -> io::Result<()> {
    write_refs(
        V0Refs::new(w, service, capabilities, http_header, false)?,
        refs,
    )
}

/// The protocol v1 advertisement: like [`write_v0_advertisement`] with a
/// `version 1` pkt before the refs (after the `# service` header and its
/// flush), as git http-backend answers `Git-Protocol: version=1`
/// (gitprotocol-pack(5), gitprotocol-http(5)).
pub fn write_v1_advertisement(
    w: &mut impl Write,
    service: Service,
    refs: &[AdvertisedRef],
    capabilities: &[String],
    http_header: bool,
) -> io::Result<()> {
    write_refs(
        V0Refs::new(w, service, capabilities, http_header, true)?,
        refs,
    )
}

fn write_refs(mut out: V0Refs<'_, impl Write>, refs: &[AdvertisedRef]) -> io::Result<()> {
    for r in refs {
        out.push(&r.name, &r.oid, r.peeled.as_ref())?;
    }
    out.finish()
}

/// The v2 capability advertisement: "version 2" then one pkt per
/// capability, then flush (gitprotocol-v2(5) "Capability Advertisement").
///
/// git 2.47 http-backend sends it **without** the `# service=` header and
/// its flush (checked with `Git-Protocol: version=2`), so pass
/// `http_header: false` to match canonical git; `true` prefixes the header
/// and its flush for `service`, which git's client also accepts. Capabilities are
/// written as given, e.g. `agent=…`, `ls-refs=unborn`, `fetch=shallow
/// wait-for-done`, `server-option`, `object-format=sha1`.
pub fn write_v2_capabilities(
    w: &mut impl Write,
    service: Service,
    capabilities: &[String],
    http_header: bool,
) -> io::Result<()> {
    let mut batch = PktBatch::new(w);
    if http_header {
        write_service_header(&mut batch, service)?;
    }
    batch.text("version 2")?;
    for cap in capabilities {
        batch.text(cap)?;
    }
    batch.special(b"0000")?;
    batch.finish()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::pktline::{Packet, PktReader};

    const GIT_UPLOAD_V0: &[u8] = include_bytes!("../tests/fixtures/upload_pack_v0.pkt");
    const GIT_RECEIVE_V0: &[u8] = include_bytes!("../tests/fixtures/receive_pack_v0.pkt");
    const GIT_UPLOAD_EMPTY: &[u8] = include_bytes!("../tests/fixtures/upload_pack_v0_empty.pkt");
    const GIT_RECEIVE_EMPTY: &[u8] = include_bytes!("../tests/fixtures/receive_pack_v0_empty.pkt");
    const GIT_UPLOAD_V2: &[u8] = include_bytes!("../tests/fixtures/upload_pack_v2_caps.pkt");

    pub(crate) fn oid(hex: &str) -> ObjectId {
        ObjectId::from_hex(hex.as_bytes()).unwrap()
    }

    pub(crate) fn packets(bytes: &[u8]) -> Vec<Packet> {
        let mut r = PktReader::new(bytes);
        let mut out = Vec::new();
        while let Some(p) = r.read_packet().unwrap() {
            out.push(p);
        }
        out
    }

    /// What a v0 advertisement says, parsed back: (header?, refs, caps).
    fn parse_v0(bytes: &[u8]) -> (Option<String>, Vec<AdvertisedRef>, Vec<String>) {
        let mut ps = packets(bytes).into_iter().peekable();
        let mut header = None;
        if let Some(Packet::Data(d)) = ps.peek() {
            if d.starts_with(b"# service=") {
                header = Some(String::from_utf8(d.clone()).unwrap());
                ps.next();
                assert_eq!(
                    ps.next(),
                    Some(Packet::Flush),
                    "flush after the service line"
                );
            }
        }
        let mut refs: Vec<AdvertisedRef> = Vec::new();
        let mut caps = Vec::new();
        let mut first = true;
        loop {
            match ps.next().expect("advertisement ends in a flush") {
                Packet::Flush => break,
                Packet::Data(d) => {
                    assert_eq!(d.last(), Some(&b'\n'), "ref lines end in LF");
                    let line = &d[..d.len() - 1];
                    let (line, cap_part) = match line.iter().position(|&b| b == 0) {
                        Some(nul) => (&line[..nul], Some(&line[nul + 1..])),
                        None => (line, None),
                    };
                    assert_eq!(cap_part.is_some(), first, "caps on the first line only");
                    if let Some(c) = cap_part {
                        caps = std::str::from_utf8(c)
                            .unwrap()
                            .split(' ')
                            .map(str::to_owned)
                            .collect();
                    }
                    first = false;
                    let line = std::str::from_utf8(line).unwrap();
                    let (hex, name) = line.split_once(' ').unwrap();
                    if name == "capabilities^{}" {
                        assert!(refs.is_empty());
                        assert_eq!(hex, "0".repeat(40));
                        continue;
                    }
                    if let Some(base) = name.strip_suffix("^{}") {
                        let last = refs.last_mut().unwrap();
                        assert_eq!(last.name, base, "peeled line follows its tag");
                        last.peeled = Some(oid(hex));
                        continue;
                    }
                    refs.push(AdvertisedRef {
                        name: name.to_owned(),
                        oid: oid(hex),
                        peeled: None,
                        symref_target: None,
                    });
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(ps.next().is_none(), "nothing after the final flush");
        for cap in &caps {
            if let Some(sym) = cap.strip_prefix("symref=") {
                let (from, to) = sym.split_once(':').unwrap();
                refs.iter_mut()
                    .find(|r| r.name == from)
                    .unwrap()
                    .symref_target = Some(to.to_owned());
            }
        }
        (header, refs, caps)
    }

    /// Parse what canonical git sent, regenerate it from the parsed refs and
    /// capabilities, and compare byte for byte.
    fn regenerate(git: &[u8], service: Service) -> (Vec<AdvertisedRef>, Vec<String>) {
        let (header, refs, caps) = parse_v0(git);
        assert_eq!(
            header.as_deref(),
            Some(format!("# service={}\n", service.name()).as_str())
        );
        let mut ours = Vec::new();
        write_v0_advertisement(&mut ours, service, &refs, &caps, true).unwrap();
        assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(git));
        assert_eq!(ours, git);
        (refs, caps)
    }

    #[test]
    fn upload_pack_v0_matches_git() {
        let (refs, caps) = regenerate(GIT_UPLOAD_V0, Service::UploadPack);
        assert_eq!(refs[0].name, "HEAD");
        assert_eq!(refs[0].symref_target.as_deref(), Some("refs/heads/main"));
        let tag = refs.iter().find(|r| r.name == "refs/tags/v1").unwrap();
        assert!(tag.peeled.is_some());
        assert!(refs
            .iter()
            .filter(|r| r.name != "refs/tags/v1")
            .all(|r| r.peeled.is_none()));
        // symref capability derivable from the refs, at the position git uses
        assert!(caps.contains(&symref_capabilities(&refs)[0]));
        assert_eq!(
            symref_capabilities(&refs),
            vec!["symref=HEAD:refs/heads/main".to_owned()]
        );
    }

    #[test]
    fn receive_pack_v0_matches_git() {
        let (refs, caps) = regenerate(GIT_RECEIVE_V0, Service::ReceivePack);
        assert!(refs.iter().all(|r| r.name != "HEAD"));
        assert!(caps.iter().any(|c| c == "report-status"));
        // Peeled info given for receive-pack is not written, as git does not.
        let mut with_peeled = refs.clone();
        with_peeled.last_mut().unwrap().peeled = Some(refs[0].oid);
        let mut ours = Vec::new();
        write_v0_advertisement(&mut ours, Service::ReceivePack, &with_peeled, &caps, true).unwrap();
        assert_eq!(ours, GIT_RECEIVE_V0);
    }

    #[test]
    fn empty_repository_matches_git() {
        let (refs, _) = regenerate(GIT_UPLOAD_EMPTY, Service::UploadPack);
        assert!(refs.is_empty());
        let (refs, _) = regenerate(GIT_RECEIVE_EMPTY, Service::ReceivePack);
        assert!(refs.is_empty());
    }

    #[test]
    fn empty_repository_exact_bytes() {
        let mut out = Vec::new();
        let caps = vec!["report-status".to_owned(), "agent=gitstow/0".to_owned()];
        write_v0_advertisement(&mut out, Service::ReceivePack, &[], &caps, true).unwrap();
        let mut want = b"001f# service=git-receive-pack\n0000".to_vec();
        let line = format!(
            "{} capabilities^{{}}\0report-status agent=gitstow/0\n",
            "0".repeat(40)
        );
        want.extend_from_slice(format!("{:04x}", line.len() + 4).as_bytes());
        want.extend_from_slice(line.as_bytes());
        want.extend_from_slice(b"0000");
        assert_eq!(out, want);
    }

    #[test]
    fn an_empty_sha256_repository_advertises_64_zeros() {
        // git's receive-pack in a SHA-256 repository (t5702's shape): the
        // first object-format value is the one the ids use.
        for caps in [
            vec![
                "report-status".to_owned(),
                "object-format=sha256".to_owned(),
            ],
            vec![
                "object-format=sha256".to_owned(),
                "object-format=sha1".to_owned(),
            ],
        ] {
            let mut out = Vec::new();
            write_v0_advertisement(&mut out, Service::ReceivePack, &[], &caps, false).unwrap();
            let text = String::from_utf8_lossy(&out);
            assert!(
                text.contains(&format!("{} capabilities^{{}}\0", "0".repeat(64))),
                "{text}"
            );
        }
    }

    #[test]
    fn without_http_header() {
        let (_, refs, caps) = parse_v0(GIT_UPLOAD_V0);
        let mut out = Vec::new();
        write_v0_advertisement(&mut out, Service::UploadPack, &refs, &caps, false).unwrap();
        let header_len = b"001e# service=git-upload-pack\n0000".len();
        assert_eq!(out, &GIT_UPLOAD_V0[header_len..]);
    }

    #[test]
    fn v1_advertisement() {
        let (_, refs, caps) = parse_v0(GIT_UPLOAD_V0);
        let mut out = Vec::new();
        write_v1_advertisement(&mut out, Service::UploadPack, &refs, &caps, true).unwrap();
        let header_len = b"001e# service=git-upload-pack\n0000".len();
        let mut want = GIT_UPLOAD_V0[..header_len].to_vec();
        want.extend_from_slice(b"000eversion 1\n");
        want.extend_from_slice(&GIT_UPLOAD_V0[header_len..]);
        assert_eq!(out, want);
    }

    #[test]
    fn v2_capabilities_match_git() {
        let ps = packets(GIT_UPLOAD_V2);
        assert_eq!(
            ps[0],
            Packet::Data(b"version 2\n".to_vec()),
            "git sends no # service header for v2"
        );
        assert_eq!(ps.last(), Some(&Packet::Flush));
        let caps: Vec<String> = ps[1..ps.len() - 1]
            .iter()
            .map(|p| String::from_utf8(p.as_text().unwrap().to_vec()).unwrap())
            .collect();
        assert!(caps.iter().any(|c| c.starts_with("fetch")));
        let mut out = Vec::new();
        write_v2_capabilities(&mut out, Service::UploadPack, &caps, false).unwrap();
        assert_eq!(out, GIT_UPLOAD_V2);
        let mut out = Vec::new();
        write_v2_capabilities(&mut out, Service::UploadPack, &caps, true).unwrap();
        assert!(out.starts_with(b"001e# service=git-upload-pack\n0000000eversion 2\n"));
        assert!(out.ends_with(GIT_UPLOAD_V2));
    }

    #[test]
    fn service_names() {
        assert_eq!(Service::UploadPack.name(), "git-upload-pack");
        assert_eq!(Service::ReceivePack.name(), "git-receive-pack");
        assert_eq!(
            Service::from_name("git-upload-pack"),
            Some(Service::UploadPack)
        );
        assert_eq!(
            Service::from_name("git-receive-pack"),
            Some(Service::ReceivePack)
        );
        assert_eq!(Service::from_name("git-upload-archive"), None);
        assert_eq!(Service::from_name("upload-pack"), None);
        // as git http-backend 2.47 sends them (v2 included)
        assert_eq!(
            Service::UploadPack.advertisement_content_type(),
            "application/x-git-upload-pack-advertisement"
        );
        assert_eq!(
            Service::ReceivePack.advertisement_content_type(),
            "application/x-git-receive-pack-advertisement"
        );
        assert_eq!(
            Service::UploadPack.request_content_type(),
            "application/x-git-upload-pack-request"
        );
        assert_eq!(
            Service::UploadPack.result_content_type(),
            "application/x-git-upload-pack-result"
        );
        assert_eq!(
            Service::ReceivePack.result_content_type(),
            "application/x-git-receive-pack-result"
        );
    }
}

//! `gitstow webhook`: the webhooks of the access document
//! ([`gitstow_access::Webhook`]); events are delivered by every server of
//! the store (see [`gitstow_hooks::deliver`]).

use clap::Subcommand;
use gitstow_access::{RepoPattern, Webhook};

use crate::admin::{run, Failure, IfMissing};
use crate::store_open::StoreArgs;

/// `gitstow webhook …`.
#[derive(Debug, clap::Args)]
pub struct WebhookArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: WebhookCommand,
}

/// Webhook commands.
#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Announce the pushes to the repositories PATTERN matches: each push
    /// that lands is POSTed to URL as JSON (repository, pusher's token
    /// name, ref updates with old and new oids, push options), signed
    /// with HMAC-SHA256 of the body in `X-Gitstow-Signature-256:
    /// sha256=<hex>`, at least once (retried with backoff for about 4
    /// hours). The signing secret is printed once, as the last word of the
    /// output, unless given with --secret-file.
    Add {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// A unique name (letters, digits, '.', '_', '-').
        #[arg(long)]
        name: String,
        /// `org/project`, `org/*` or `*`.
        #[arg(long = "repo", default_value = "*")]
        pattern: String,
        /// Where events are POSTed (http:// or https://).
        #[arg(long = "url", value_name = "URL")]
        to: String,
        /// A file holding the signing secret (at least 16 bytes; a trailing
        /// newline is dropped). Default: a new random secret.
        #[arg(long)]
        secret_file: Option<std::path::PathBuf>,
        /// Allow a target on this machine, link-local or a cloud metadata
        /// service (`localhost`, 127.0.0.0/8, ::1, 0.0.0.0/8,
        /// 169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200, and
        /// these written as IPv6), refused otherwise.
        #[arg(long)]
        allow_internal: bool,
    },
    /// List the webhooks (names, patterns, URLs; never secrets).
    List {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// One JSON array on stdout: `[{"name", "repositories", "url"}]`
        /// (the URL without credentials, as the table shows it).
        #[arg(long)]
        json: bool,
    },
    /// Remove a webhook by name (events not delivered yet to it are dropped).
    Remove {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// The webhook's name.
        name: String,
    },
}

/// `url` without what may be a credential: the user information
/// (`user:password@`) and the query are shown as `***`.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let host = match authority.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None => authority.to_owned(),
    };
    let path = match path.split_once('?') {
        Some((p, _)) => format!("{p}?***"),
        None => path.to_owned(),
    };
    format!("{scheme}://{host}{path}")
}

/// An IPv4 address a pushing server reaches but its users should not:
/// loopback, link-local (169.254/16: AWS, GCP, Azure and Oracle metadata),
/// "this network" (0/8, which Linux sends to this machine) and Alibaba
/// Cloud's metadata (100.100.100.200).
fn internal_v4(v4: std::net::Ipv4Addr) -> bool {
    v4.is_loopback()
        || v4.is_link_local()
        || v4.octets()[0] == 0
        || v4 == std::net::Ipv4Addr::new(100, 100, 100, 200)
}

/// An IPv6 address a pushing server reaches but its users should not:
/// loopback, unspecified, link-local (fe80::/10), AWS's metadata
/// (fd00:ec2::254), and an internal IPv4 address written as IPv6 (mapped
/// `::ffff:a.b.c.d`, compatible `::a.b.c.d`, or NAT64's `64:ff9b::/96`).
fn internal_v6(v6: std::net::Ipv6Addr) -> bool {
    let s = v6.segments();
    let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    let embedded = nat64.then(|| std::net::Ipv4Addr::from(u128::from(v6) as u32));
    v6.is_loopback()
        || v6.is_unspecified()
        || (s[0] & 0xffc0) == 0xfe80
        || v6 == std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
        || v6.to_ipv4().is_some_and(internal_v4)
        || embedded.is_some_and(internal_v4)
}

/// Checks `url` as a webhook target: `http://` or `https://`, a host, a
/// port within 1–65535. A target on this machine, link-local or a cloud
/// metadata service (a literal address or `localhost`: what a pushing
/// server can reach but its users should not, such as metadata at
/// 169.254.169.254 or a database on 127.0.0.1; [`internal_v4`],
/// [`internal_v6`]) is refused unless `allow_internal`; a private address
/// (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) is allowed with a
/// warning, returned. Host names are not resolved here: one that resolves
/// to such an address at delivery time is the operator's to control.
///
/// # Errors
/// Why the URL is refused, for the command's error line.
pub fn check_target(url: &str, allow_internal: bool) -> Result<Option<String>, String> {
    let invalid = |why: &str| Err(format!("invalid webhook URL {:?}: {why}", redact_url(url)));
    let uri: http::Uri = match url.parse() {
        Ok(u) => u,
        Err(e) => return invalid(&e.to_string()),
    };
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return invalid("want http://HOST/… or https://HOST/…");
    }
    let Some(authority) = uri.authority() else {
        return invalid("no host");
    };
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    if host.is_empty() {
        return invalid("no host");
    }
    // After the host: nothing, or `:PORT` with PORT in 1..=65535.
    let host_port = authority.as_str().rsplit('@').next().unwrap_or("");
    let after_host = match host_port.rsplit_once(']') {
        Some((_, rest)) => rest.strip_prefix(':'),
        None => host_port.split_once(':').map(|(_, port)| port),
    };
    if let Some(port) = after_host {
        if !port.parse::<u16>().is_ok_and(|p| p > 0) {
            return invalid(&format!("port {port:?} is not within 1-65535"));
        }
    }
    // An IPv6 literal's zone (`fe80::1%25eth0`) does not change the address.
    let name = host.split("%25").next().unwrap_or(host);
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    let ip: Option<std::net::IpAddr> = name
        .parse()
        .ok()
        .or_else(|| inet_aton(&name).map(std::net::IpAddr::V4));
    let internal = name == "localhost"
        || name.ends_with(".localhost")
        || ip.is_some_and(|ip| match ip {
            std::net::IpAddr::V4(v4) => internal_v4(v4),
            std::net::IpAddr::V6(v6) => internal_v6(v6),
        });
    if internal && !allow_internal {
        return Err(format!(
            "webhook URL {:?} targets this machine or a link-local address (where cloud metadata answers): refused; pass --allow-internal if that is meant",
            redact_url(url)
        ));
    }
    let private = ip.is_some_and(|ip| match ip {
        std::net::IpAddr::V4(v4) => {
            v4.is_private() || (v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64)
        }
        std::net::IpAddr::V6(v6) => (v6.segments()[0] & 0xfe00) == 0xfc00,
    });
    Ok(private.then(|| {
        format!(
            "webhook URL {:?} is a private address: every push to its repositories is POSTed there",
            redact_url(url)
        )
    }))
}

/// An IPv4 address in any form the resolver takes (inet_aton(3): one to
/// four parts, each decimal, octal with a leading `0` or hex with `0x`,
/// the last filling the remaining bytes: `2130706433`, `0x7f.1`,
/// `127.1`, `0177.0.0.1`); `None` for anything else.
fn inet_aton(name: &str) -> Option<std::net::Ipv4Addr> {
    let parts: Vec<&str> = name.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(parts.len());
    for p in &parts {
        let v = if let Some(hex) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
            u32::from_str_radix(hex, 16).ok()?
        } else if p.len() > 1 && p.starts_with('0') {
            u32::from_str_radix(&p[1..], 8).ok()?
        } else if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) {
            p.parse().ok()?
        } else {
            return None;
        };
        values.push(v);
    }
    let (last, leading) = values.split_last()?;
    if leading.iter().any(|&v| v > 255) || u64::from(*last) >= 1u64 << (8 * (4 - leading.len())) {
        return None;
    }
    let mut addr = *last;
    for (i, &v) in leading.iter().enumerate() {
        addr |= v << (24 - 8 * i);
    }
    Some(std::net::Ipv4Addr::from(addr))
}

/// Runs a webhook command; returns the exit code.
pub fn webhook_main(args: WebhookArgs) -> i32 {
    match args.command {
        WebhookCommand::Add {
            store,
            name,
            pattern,
            to: url,
            secret_file,
            allow_internal,
        } => run(&store, IfMissing::Refuse, |s| {
            let repos = RepoPattern::parse(&pattern)?;
            if let Some(warning) = check_target(&url, allow_internal)? {
                eprintln!("gitstow: warning: {warning}");
            }
            let (secret, generated) = match &secret_file {
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .map_err(|e| format!("--secret-file {}: {e}", path.display()))?;
                    (text.trim_end_matches(['\n', '\r']).to_owned(), false)
                }
                None => {
                    let secret = gitstow_access::new_secret()?;
                    let hex = secret
                        .strip_prefix(gitstow_access::SECRET_PREFIX)
                        .unwrap_or(&secret)
                        .to_owned();
                    (hex, true)
                }
            };
            let hook = Webhook {
                name: name.clone(),
                repos: repos.clone(),
                url: url.clone(),
                secret: secret.clone(),
            };
            gitstow_access::update(s, |doc| doc.add_webhook(hook.clone()))?;
            let shown = redact_url(&url);
            if generated {
                println!(
                    "added webhook '{name}': pushes to {repos} are POSTed to {shown}; its signing secret, shown only now:"
                );
                println!("{secret}");
            } else {
                println!("added webhook '{name}': pushes to {repos} are POSTed to {shown}");
            }
            Ok(())
        }),
        WebhookCommand::List { store, json } => run(&store, IfMissing::Refuse, |s| {
            let (doc, _) = gitstow_access::load(s.as_ref())?;
            if json {
                let rows: Vec<serde_json::Value> = doc
                    .webhooks
                    .iter()
                    .map(|w| {
                        serde_json::json!({
                            "name": w.name,
                            "repositories": w.repos.as_str(),
                            "url": redact_url(&w.url),
                        })
                    })
                    .collect();
                println!("{}", serde_json::Value::from(rows));
                return Ok(());
            }
            if doc.webhooks.is_empty() {
                println!("no webhooks");
                return Ok(());
            }
            println!("{:<24} {:<24} URL", "NAME", "REPOSITORIES");
            for w in &doc.webhooks {
                println!(
                    "{:<24} {:<24} {}",
                    w.name,
                    w.repos.as_str(),
                    redact_url(&w.url)
                );
            }
            Ok(())
        }),
        WebhookCommand::Remove { store, name } => run(&store, IfMissing::Refuse, |s| {
            let removed = gitstow_access::update(s, |doc| Ok(doc.remove_webhook(&name)))?;
            if !removed {
                return Err(Failure::from(format!("no webhook named {name:?}")));
            }
            println!("removed webhook '{name}'");
            Ok(())
        }),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn targets_are_checked() {
        use super::check_target;
        for ok in [
            "https://ci.example.com/hook",
            "http://ci.internal:8080/x",
            "https://[2001:db8::1]:443/",
        ] {
            assert_eq!(check_target(ok, false), Ok(None), "{ok}");
        }
        for bad in [
            "http://169.254.169.254/latest/meta-data",
            "http://127.0.0.1:6379/",
            "http://localhost/hook",
            "http://[::1]:80/",
            "http://[::ffff:127.0.0.1]/",
            "http://0.0.0.0/",
            "http://[fe80::1]/",
            "http://[fe80::1%25eth0]/",
            "http://2130706433:47123/",
            "http://0x7f.1/",
            "http://127.1/",
            "http://0177.0.0.1/",
            "http://0/",
            "http://2852039166/",
            "http://[fd00:ec2::254]/latest/meta-data",
            "http://[::127.0.0.1]/",
            "http://[64:ff9b::7f00:1]/",
            "http://[64:ff9b::169.254.169.254]/",
            "http://0.1.2.3/",
            "http://100.100.100.200/latest/meta-data",
        ] {
            let err = check_target(bad, false).unwrap_err();
            assert!(err.contains("--allow-internal"), "{bad}: {err}");
            assert!(check_target(bad, true).is_ok(), "{bad}");
        }
        for malformed in [
            "http://ci.example:99999999/",
            "http://ci.example:0/",
            "ftp://ci.example/",
            "http:///x",
            "ci.example/hook",
            "http://[::1/",
        ] {
            let err = check_target(malformed, true).unwrap_err();
            assert!(err.contains("invalid webhook URL"), "{malformed}: {err}");
        }
        assert!(check_target("http://10.1.2.3/hook", false)
            .unwrap()
            .unwrap()
            .contains("private"));
        assert!(check_target("http://u:p@ci.example:8443/h", false).is_ok());
    }

    #[test]
    fn urls_are_shown_without_credentials() {
        assert_eq!(
            super::redact_url("https://u:p@ci.example:8443/hook?token=x"),
            "https://***@ci.example:8443/hook?***"
        );
        assert_eq!(
            super::redact_url("http://ci.example/hook"),
            "http://ci.example/hook"
        );
    }
}

//! `gitstow serve --config FILE`: flags from a TOML file.
//!
//! Each key of the file's top level is a flag of `serve`, named as on the
//! command line without its dashes (`_` may stand for `-`); the value is
//! the flag's value:
//!
//! ```toml
//! listen = "0.0.0.0:8080"
//! store = "s3://my-bucket/git"
//! s3-endpoint = "https://s3.example.com"
//! max-pack-size = "8GiB"
//! pre-receive-timeout = 20
//! no-maintenance = true          # a switch: true gives it, false leaves it out
//!                                # (`--no-maintenance=false` on the command line
//!                                # turns a file's switch off)
//! ```
//!
//! The file's flags go before the command line's, and a flag given twice
//! takes its last value, so the command line overrides the file. A key
//! that is not a flag is refused by the same parser, naming it.

use std::ffi::OsString;

/// Expands `--config FILE` (or `--config=FILE`) after `serve` in `args`
/// into the file's flags, placed right after `serve`.
///
/// # Errors
/// The file cannot be read, is not TOML, or holds a value that is not a
/// string, number, boolean or array of those.
pub fn expand(args: Vec<OsString>) -> Result<Vec<OsString>, String> {
    // Only as the subcommand: `gitstow serve …`.
    if args.get(1).is_none_or(|a| a != "serve") {
        return Ok(args);
    }
    let serve = 1;
    let mut path = None;
    let mut rest = Vec::with_capacity(args.len());
    let mut it = args.into_iter().enumerate();
    while let Some((i, a)) = it.next() {
        if i > serve {
            if a == "--config" {
                path = it.next().map(|(_, p)| p);
                continue;
            }
            if let Some(p) = a.to_str().and_then(|s| s.strip_prefix("--config=")) {
                path = Some(OsString::from(p));
                continue;
            }
        }
        rest.push(a);
    }
    let Some(path) = path else {
        return Ok(rest);
    };
    let shown = std::path::Path::new(&path).display().to_string();
    let text = std::fs::read_to_string(&path).map_err(|e| format!("--config {shown}: {e}"))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| format!("--config {shown}: not TOML: {e}"))?;
    let mut flags: Vec<OsString> = Vec::new();
    for (key, value) in &table {
        let flag = format!("--{}", key.replace('_', "-"));
        if flag == "--config" {
            return Err(format!(
                "--config {shown}: a config file cannot name another (config = …)"
            ));
        }
        let mut push = |v: &toml::Value| -> Result<(), String> {
            match v {
                toml::Value::String(s) => flags.extend([flag.clone().into(), s.into()]),
                toml::Value::Integer(n) => {
                    flags.extend([flag.clone().into(), n.to_string().into()])
                }
                toml::Value::Float(n) => flags.extend([flag.clone().into(), n.to_string().into()]),
                toml::Value::Boolean(true) => flags.push(flag.clone().into()),
                toml::Value::Boolean(false) => {}
                other => {
                    return Err(format!(
                        "--config {shown}: {key} = {other}: want a string, number or boolean"
                    ))
                }
            }
            Ok(())
        };
        match value {
            toml::Value::Array(items) => {
                for item in items {
                    push(item)?;
                }
            }
            v => push(v)?,
        }
    }
    let mut out = rest;
    out.splice(serve + 1..serve + 1, flags);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_file_comes_first_so_the_command_line_overrides_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("gitstow.toml");
        std::fs::write(
            &file,
            "listen = \"0.0.0.0:9\"\nmax_pack_size = \"1GiB\"\nno-maintenance = true\ninsecure-no-auth = false\nidle-timeout = 5\n",
        )
        .unwrap();
        let got = expand(args(&[
            "gitstow",
            "serve",
            "--config",
            file.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ]))
        .unwrap();
        assert_eq!(
            got,
            args(&[
                "gitstow",
                "serve",
                "--idle-timeout",
                "5",
                "--listen",
                "0.0.0.0:9",
                "--max-pack-size",
                "1GiB",
                "--no-maintenance",
                "--listen",
                "127.0.0.1:0",
            ])
        );
        assert!(expand(args(&["gitstow", "serve", "--config", "/nonexistent"])).is_err());
        std::fs::write(&file, "listen = [").unwrap();
        let e = expand(args(&[
            "gitstow",
            "serve",
            "--config",
            file.to_str().unwrap(),
        ]))
        .unwrap_err();
        assert!(e.contains("not TOML"), "{e}");
        std::fs::write(&file, "config = \"other.toml\"\n").unwrap();
        let e = expand(args(&[
            "gitstow",
            "serve",
            "--config",
            file.to_str().unwrap(),
        ]))
        .unwrap_err();
        assert!(e.contains("cannot name another"), "{e}");
    }

    #[test]
    fn the_command_line_turns_a_switch_of_the_file_off() {
        use clap::Parser;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("gitstow.toml");
        std::fs::write(&file, "no-maintenance = true\n").unwrap();
        let parse = |extra: &[&str]| {
            let mut a = vec!["gitstow", "serve", "--config", file.to_str().unwrap()];
            a.extend_from_slice(extra);
            let cli = crate::cli::Cli::try_parse_from(expand(args(&a)).unwrap()).unwrap();
            match cli.command {
                crate::cli::Command::Serve(s) => s.maintenance.no_maintenance,
                _ => unreachable!(),
            }
        };
        assert!(parse(&[]));
        assert!(!parse(&["--no-maintenance=false"]));
        assert!(parse(&["--no-maintenance"]));
    }
}

//! `gitstow-histgen DIR [--seed N] [--commits N] …`: generates a history into
//! a new bare repository at DIR and prints its summary.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use gitstow_histgen::{generate, Options};

const USAGE: &str = "usage: gitstow-histgen DIR [--seed N] [--commits N] [--branches N] [--files N]
                       [--binary-every N] [--tag-every N] [--merge-every N]
                       [--rename-every N] [--large-blob-bytes N]
Creates a bare repository at DIR (which must not exist or be empty) holding a
deterministic history; defaults are those of gitstow_histgen::Options.";

fn parse(args: Vec<String>) -> Result<(PathBuf, Options), String> {
    let mut opts = Options::default();
    let mut dir = None;
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        if arg == "-h" || arg == "--help" {
            return Err(String::new());
        }
        let Some(flag) = arg.strip_prefix("--") else {
            if dir.replace(PathBuf::from(&arg)).is_some() {
                return Err(format!("more than one DIR given: {arg}"));
            }
            continue;
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
            None => (flag.to_owned(), None),
        };
        let value = inline
            .or_else(|| it.next())
            .ok_or_else(|| format!("--{name} needs a value"))?;
        let n: u64 = value
            .parse()
            .map_err(|_| format!("--{name}: not a non-negative integer: {value}"))?;
        let size = usize::try_from(n).map_err(|_| format!("--{name}: too large: {n}"))?;
        match name.as_str() {
            "seed" => opts.seed = n,
            "commits" => opts.commits = size,
            "branches" => opts.branches = size,
            "files" => opts.files = size,
            "binary-every" => opts.binary_every = size,
            "tag-every" => opts.tag_every = size,
            "merge-every" => opts.merge_every = size,
            "rename-every" => opts.rename_every = size,
            "large-blob-bytes" => opts.large_blob_bytes = size,
            _ => return Err(format!("unknown option --{name}")),
        }
    }
    let dir = dir.ok_or_else(|| "DIR is required".to_owned())?;
    Ok((dir, opts))
}

fn main() -> ExitCode {
    let (dir, opts) = match parse(std::env::args().skip(1).collect()) {
        Ok(v) => v,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("gitstow-histgen: {msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(if msg.is_empty() { 0 } else { 2 });
        }
    };
    let started = std::time::Instant::now();
    match generate(&dir, &opts) {
        Ok(s) => {
            println!("repository: {}", dir.display());
            println!("seed:       {}", opts.seed);
            println!("commits:    {}", s.commits);
            println!("merges:     {}", s.merges);
            println!("renames:    {}", s.renames);
            println!("tags:       {}", s.tags);
            println!("branches:   {}", s.branches.join(" "));
            println!("elapsed:    {:.2?}", started.elapsed());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gitstow-histgen: {e}");
            ExitCode::FAILURE
        }
    }
}

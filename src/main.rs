//! The `gitstow` binary: the command line and its admin commands, and the
//! start of a server, which runs the two sibling transports (smart HTTP,
//! `gitstow-http`; SSH, `gitstow-ssh`) over one service (`gitstow-service`).
//!
//! - [`cli`]: the commands, logging, sizes.
//! - [`store_open`]: the store's flags, and the one way every command opens it.
//! - [`admin`]: what the admin commands share (their failure, their frame).
//! - [`progress`]: progress on stderr for admin commands, in git's form.
//! - [`size`]: byte counts for people, as git writes them.
//! - [`config_file`]: `serve --config FILE` (flags from TOML).
//! - [`serve_cmd`]: `gitstow serve`'s flags.
//! - [`serve_settings`]: the flags turned into settings (every rule, unit-tested).
//! - [`serve_run`]: a server run from its settings, to its shutdown.
//! - [`serve_maintenance`]: serve's automatic maintenance flags.
//! - [`ssh_access`]: SSH keys, mapped to tokens for `serve --ssh-listen`.
//! - [`maintain_cmd`]: `gitstow maintain`.
//! - [`token_cmd`]: `gitstow token` and `gitstow access`.
//! - [`key_cmd`]: `gitstow key`.
//! - [`webhook_cmd`]: `gitstow webhook`.
//! - [`repo_cmd`]: `gitstow repo` and `gitstow fsck`.
//! - [`mirror_cmd`]: `gitstow mirror` (pull and push mirrors).
//! - [`mirror_credentials`]: their credentials and the key that seals them.
//! - [`limits`]: process limits set at start (open files).
//! - [`leftovers`]: scratch directories and the sweep of crashed processes' leftovers.
#![deny(missing_docs)]

mod admin;
mod cli;
mod config_file;
mod key_cmd;
mod leftovers;
mod limits;
mod maintain_cmd;
mod mirror_cmd;
mod mirror_credentials;
mod progress;
mod repo_cmd;
mod serve_cmd;
mod serve_maintenance;
mod serve_run;
mod serve_settings;
mod size;
mod ssh_access;
mod store_open;
mod token_cmd;
mod webhook_cmd;

#[global_allocator]
static ALLOC: gitstow_http::alloc::CountingJemalloc = gitstow_http::alloc::CountingJemalloc;

/// jemalloc reads its options from this symbol at start-up (see
/// `gitstow_http::alloc::MALLOC_CONF`).
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8] = gitstow_http::alloc::MALLOC_CONF;

fn main() {
    std::process::exit(cli::main())
}

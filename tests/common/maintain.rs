//! Test harness: what the maintenance and GC tests share.

use super::*;

/// Asserts that a `gitstow maintain` run succeeded; returns its stdout.
pub fn assert_maintained(out: &Output) -> String {
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "gitstow maintain failed: {}\n--- stdout ---\n{said}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    said
}

/// Ids of the containers of repository `name` that have a `.bin` in the store.
pub fn stored_bins(store: &TestStore, name: &str) -> std::collections::BTreeSet<String> {
    let prefix = format!("{name}.git/containers/");
    store
        .keys()
        .iter()
        .filter_map(|k| k.strip_prefix(&prefix))
        .filter_map(|k| k.strip_suffix(".bin"))
        .map(str::to_owned)
        .collect()
}

/// Mirror-clones `url` into `parent/dir`, checks it with `fsck --full
/// --strict` and returns its refs and objects ([`refs_and_objects`]).
pub fn mirror_checked(url: &str, parent: &Path, dir: &str) -> (String, String) {
    git(parent, &["clone", "--quiet", "--mirror", url, dir]);
    let dst = parent.join(dir);
    fsck(&dst);
    refs_and_objects(&dst)
}

/// Force-pushes `oid` from `work` to `refs/heads/main` of `url`.
pub fn force_main(work: &Path, url: &str, oid: &str) {
    git(
        work,
        &[
            "push",
            "--quiet",
            "--force",
            url,
            &format!("{oid}:refs/heads/main"),
        ],
    );
}

/// The oid ref `name` has in `state`'s inline refs (the small repositories
/// of these tests hold no ref table), as hex.
pub fn inline_ref(state: &gitstow_odb::RepoState, name: &str) -> String {
    state
        .refs
        .recent_get(name)
        .and_then(|v| v.oid())
        .unwrap_or_else(|| panic!("no ref {name} inline in the state"))
        .to_string()
}

/// Waits (at most 60 s) until automatic maintenance has written the
/// reachability bitmaps of repository `name`'s closure (the first pass
/// after an import does); panics with the server's log otherwise.
pub fn await_closure_bitmaps(server: &Server, name: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !server
        .store()
        .repo_state(name)
        .and_then(|s| s.closure)
        .is_some_and(|c| c.bitmaps)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no bitmaps over {name}'s closure:\n{}",
            server.logs()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

//! The soak benchmark's one-minute run (`benches/soak.py`): 50 git clients
//! mixing clones, incremental fetches and pushes against one `gitstow
//! serve` while 500 silent and 500 trickling connections are held open.
//! The script fails on a pushed commit missing, a branch not at its last
//! push, `fsck --full` complaints, or a request that failed for another
//! reason than the server saying it is busy; this test also checks that the
//! held connections were closed by the server's timeouts and opened again.

use std::process::Command;

#[test]
fn one_minute_of_mixed_load_with_a_thousand_held_connections() {
    let work = tempfile::tempdir().unwrap();
    let report = work.path().join("soak.md");
    let out = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/benches/soak.py"))
        .args(["--binary", env!("CARGO_BIN_EXE_gitstow")])
        .args(["--duration", "60", "--clients", "50"])
        .args(["--idle", "500", "--trickle", "500"])
        .args(["--serve-arg=--header-timeout", "--serve-arg=20"])
        .arg("--workdir")
        .arg(work.path().join("run"))
        .arg("--report")
        .arg(&report)
        .output()
        .expect("run python3 benches/soak.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}");
    if !out.status.success() {
        let log = std::fs::read_to_string(work.path().join("run/server.log")).unwrap_or_default();
        let tail: String = log.lines().rev().take(60).collect::<Vec<_>>().join("\n");
        panic!("the soak failed:\n{stdout}\n{stderr}\n---- server log, last lines (reversed) ----\n{tail}");
    }
    let again = &stdout[stdout.find("opened again: ").expect("the connections line")..];
    let closed = number_between(again, "opened again: ", " silent");
    let trickling = number_between(again, "silent, ", " trickling");
    assert!(
        closed >= 500 && trickling >= 500,
        "the server's header timeout closed {closed} silent and {trickling} trickling connections: {stdout}"
    );
    let svg = std::fs::read_to_string(work.path().join("soak.svg")).unwrap();
    assert!(svg.contains("<polyline"), "no RSS plot");
}

/// The number between `before` and `after` in `text`.
fn number_between(text: &str, before: &str, after: &str) -> u64 {
    let start = text.find(before).map(|i| i + before.len());
    start
        .and_then(|s| text[s..].find(after).map(|e| &text[s..s + e]))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no number between {before:?} and {after:?} in:\n{text}"))
}

//! Test harness: the real `git` in a clean environment.

use super::*;

/// A `HOME` shared by every git run of this test process, with a fixed
/// global config.
pub fn home() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let base = option_env!("CARGO_TARGET_TMPDIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let home = base.join(format!("gitstow-test-home-{}", std::process::id()));
        fs::create_dir_all(&home).unwrap();
        fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = Gitstow Test\n\temail = test@gitstow.invalid\n\
             [init]\n\tdefaultBranch = main\n\
             [advice]\n\tdetachedHead = false\n\
             [core]\n\tautocrlf = false\n\
             [gc]\n\tauto = 0\n\
             [maintenance]\n\tauto = false\n\
             [fetch]\n\tfsckObjects = true\n",
        )
        .unwrap();
        home
    })
}

/// A `git` command in `dir` with a clean, deterministic environment: no
/// system config, a private `HOME`, no prompts, the C locale (English
/// messages), fixed author and committer.
pub fn git_cmd(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .env("LANG", "C")
        .env("GIT_AUTHOR_NAME", "A U Thor")
        .env("GIT_AUTHOR_EMAIL", "author@example.com")
        .env("GIT_AUTHOR_DATE", "1700000000 +0000")
        .env("GIT_COMMITTER_NAME", "C O Mitter")
        .env("GIT_COMMITTER_EMAIL", "committer@example.com")
        .env("GIT_COMMITTER_DATE", "1700000000 +0000")
        .stdin(Stdio::null());
    cmd
}

fn describe(args: &[&str], dir: &Path, out: &Output) -> String {
    format!(
        "git {} (in {}) exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        args.join(" "),
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs git in `dir` and asserts it succeeds (output in the panic message).
pub fn git(dir: &Path, args: &[&str]) -> Output {
    git_env(dir, args, &[])
}

/// [`git`] with extra environment variables.
pub fn git_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let out = git_cmd(dir)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run git");
    assert!(out.status.success(), "{}", describe(args, dir, &out));
    out
}

/// The trimmed stdout of a successful git run.
pub fn git_out(dir: &Path, args: &[&str]) -> String {
    String::from_utf8(git(dir, args).stdout)
        .expect("utf-8 output")
        .trim_end()
        .to_owned()
}

/// Runs git in `dir`, asserts it fails, and returns its stderr.
pub fn git_fail(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir).args(args).output().expect("run git");
    assert!(
        !out.status.success(),
        "expected failure but {}",
        describe(args, dir, &out)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `git ls-remote URL` (sorted lines "oid\tref"); empty for an empty repository.
pub fn ls_remote(url: &str) -> String {
    git_out(home(), &["ls-remote", url])
}

/// A new non-bare repository at `dir` with `main` checked out.
pub fn init_repo(dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "--quiet", "--initial-branch=main"]);
}

/// Writes `files` (path → content), then `git add -A` and commits; returns
/// the new commit id.
pub fn commit_files(dir: &Path, files: &[(&str, &str)], message: &str) -> String {
    for (path, content) in files {
        let p = dir.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "--quiet", "-m", message]);
    git_out(dir, &["rev-parse", "HEAD"])
}

/// Asserts `git fsck --full --strict` is clean in `dir`.
pub fn fsck(dir: &Path) {
    git(dir, &["fsck", "--full", "--strict", "--no-dangling"]);
}

/// Refs and objects of a repository, for comparing two of them: the
/// `for-each-ref` listing and the sorted `rev-list --all --objects`.
pub fn refs_and_objects(dir: &Path) -> (String, String) {
    let refs = git_out(
        dir,
        &[
            "for-each-ref",
            "--format=%(objectname) %(objecttype) %(refname)",
        ],
    );
    let objects = git_out(dir, &["rev-list", "--all", "--objects"]);
    let mut lines: Vec<&str> = objects.lines().collect();
    lines.sort_unstable();
    (refs, lines.join("\n"))
}

/// A generated history (see `gitstow-histgen`) in a bare repository.
pub fn histgen(dir: &Path, opts: &gitstow_histgen::Options) -> gitstow_histgen::Summary {
    gitstow_histgen::generate(dir, opts).expect("generate history")
}

//! Reachability bitmaps over the state's closure
//! ([`gitstow_odb::bitmap`]): a GC writes them over the containers it
//! rewrote; the closure a push into an empty repository records (an
//! import) gets them from the first maintenance pass after it
//! ([`for_pushed_closure`]), without rewriting anything, so fetches with
//! haves and clones of some of the refs (a single branch) read bitmaps
//! instead of walking the history from the repository's first minutes.

use gitstow_odb::state::{Closure, ContainerRef};
use gitstow_odb::{bitmap, RepoState, Repository};
use gix_hash::ObjectId;

use crate::{update_state, Options, Result, Step};

/// The most tips a push's closure may have for [`for_pushed_closure`] to
/// write its bitmaps: every tip gets one (`bitmap::build`), so an import of
/// a million refs (Gerrit's `refs/changes/*`) waits for its GC, which
/// keeps only the tips no other reaches.
pub const MAX_PUSHED_TIPS: usize = 10_000;

/// True when `state`'s closure holds, has no bitmaps yet (a push's) and at
/// most [`MAX_PUSHED_TIPS`] tips.
pub fn due(state: &RepoState) -> bool {
    pending(state).is_some()
}

/// The closure of [`due`] and the positions of its containers.
fn pending(state: &RepoState) -> Option<(&Closure, Vec<usize>)> {
    state
        .live_closure()
        .filter(|(c, _)| !c.bitmaps && c.tips.len() <= MAX_PUSHED_TIPS)
}

/// Writes the bitmaps of `state`'s closure when it has none ([`due`]) and
/// records them in the state if the closure is still the same; returns how
/// many were recorded (0: not due, not built, or the closure changed
/// meanwhile; the file, named after the closure's first container, is
/// deleted with that container).
pub fn for_pushed_closure(repo: &Repository, state: &RepoState, opts: &Options) -> Result<usize> {
    let Some((closure, positions)) = pending(state) else {
        return Ok(0);
    };
    let live: Vec<ContainerRef> = positions
        .iter()
        .map(|&p| state.containers[p].clone())
        .collect();
    let written = write(repo, &live, &closure.tips, opts)?;
    if written == 0 {
        return Ok(0);
    }
    let expected = closure.clone();
    let recorded = update_state(
        repo,
        opts,
        "recording the closure's bitmaps",
        |s| match &s.closure {
            Some(c)
                if !c.bitmaps && c.tips == expected.tips && c.containers == expected.containers =>
            {
                let mut next = s.clone();
                if let Some(c) = next.closure.as_mut() {
                    c.bitmaps = true;
                }
                Step::Write(next, written)
            }
            _ => Step::Done(0),
        },
    )?;
    Ok(recorded.unwrap_or(0))
}

/// Builds the reachability bitmaps of the closure `live` (what `tips`
/// reach) and uploads them next to its first container; returns how many.
/// A failure to build is logged and leaves the closure without bitmaps
/// (fetches then walk); a failure to upload is an error like any other.
pub(crate) fn write(
    repo: &Repository,
    live: &[ContainerRef],
    tips: &[ObjectId],
    opts: &Options,
) -> Result<usize> {
    let started = std::time::Instant::now();
    let db = repo.live_objects(&RepoState {
        containers: live.to_vec(),
        ..RepoState::default()
    })?;
    let positions: Vec<usize> = (0..live.len()).collect();
    let indexes: Vec<&gitstow_odb::container::ContainerIndex> =
        positions.iter().map(|&p| db.container(p)).collect();
    let order = bitmap::BitOrder::new(&indexes);
    let closure = bitmap::Closure {
        db: &db,
        containers: &positions,
        order: &order,
    };
    let ids: Vec<String> = live.iter().map(|c| c.id.clone()).collect();
    let file = match bitmap::build(closure, &ids, tips, cache_bytes(live)) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(repo = repo.name(), error = %e, "reachability bitmaps not built");
            return Ok(0);
        }
    };
    // Encoded into a scratch file and streamed to the store: the file is
    // about as large as the bitmaps in memory, and is never held twice.
    let staging = crate::compact::staging_dir(opts)?;
    let scratch = tempfile::NamedTempFile::new_in(staging.path())?;
    let mut out = std::io::BufWriter::with_capacity(256 * 1024, scratch.as_file());
    let bytes = file
        .encode_to(&mut out)
        .and_then(|n| std::io::Write::flush(&mut out).map(|()| n))?;
    drop(out);
    let bitmaps = file.bitmaps.len();
    drop(file);
    if !opts.dry_run {
        repo.store()
            .put_file(&repo.bitmap_key(&live[0].id), scratch.path())?;
    }
    tracing::info!(
        repo = repo.name(),
        bitmaps,
        bytes,
        ms = started.elapsed().as_millis() as u64,
        "reachability bitmaps written"
    );
    Ok(bitmaps)
}

/// The object cache of a bitmap build: a sixteenth of the closure's stored
/// bytes, from 1 MiB to 8 MiB. The build reads each tree once, and the
/// cache serves the delta bases of the trees read next; once full, it is
/// emptied and later reads refill its buffers. A cache the build never
/// fills allocates every tree anew (ripgrep's 9 MB closure: 3.7 MB of
/// trees through an 8 MiB cache); above 8 MiB, git/git's build saved
/// 0.4 s of 6 s for 10 MB more at its peak.
fn cache_bytes(live: &[ContainerRef]) -> usize {
    let stored = live.iter().fold(0u64, |n, c| n.saturating_add(c.bytes));
    usize::try_from(stored / 16)
        .unwrap_or(usize::MAX)
        .clamp(1 << 20, 8 << 20)
}

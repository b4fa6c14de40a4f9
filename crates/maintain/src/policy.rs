//! When containers merge: git's geometric rule (`git repack --geometric=2`,
//! `split_pack_geometry` in `builtin/repack.c`), weighed by object count.
//!
//! Sorted by weight, the containers that are kept must form a geometric
//! progression: each at least `factor` times the weight of the next lighter
//! one. Everything lighter than where the progression breaks is merged into
//! one new container, and a kept container lighter than `factor` times that
//! merged weight joins the merge too. With factor 2 a repository holds at most
//! about log2(objects) containers whatever its number of pushes, and an
//! object is rewritten O(log n) times over its life.
//!
//! Containers that are already *full* (at least half the configured maximum
//! container size) stay out of the progression: merging them would only
//! produce full containers again, and so do the containers of the state's
//! closure: merging one would drop the closure that lets a clone skip the
//! walk of the history (the next GC rewrites them).
//!
//! When a GC is due by the work pushes left ([`gc_due_by_work`]): when the
//! objects outside the closure (what a clone must walk) pass both a floor
//! and a share of the closure's objects, at most once per interval.

use std::time::Duration;

use gitstow_odb::state::ContainerRef;
use gitstow_odb::RepoState;

/// True when `c` holds at least half of `max_container_bytes`: merging it
/// would only write a full container again.
pub fn is_full(c: &ContainerRef, max_container_bytes: u64) -> bool {
    c.bytes.saturating_mul(2) >= max_container_bytes
}

/// The containers to merge, as positions in the state's list (ascending), or
/// an empty list when the containers already form a progression. Never a
/// single container: merging one would change nothing.
pub fn geometric(containers: &[ContainerRef], factor: u64, max_container_bytes: u64) -> Vec<usize> {
    let factor = factor.max(2);
    let mut candidates: Vec<(u64, usize)> = containers
        .iter()
        .enumerate()
        .filter(|(_, c)| !is_full(c, max_container_bytes))
        .map(|(i, c)| (c.objects.max(1), i))
        .collect();
    if candidates.len() < 2 {
        return Vec::new();
    }
    candidates.sort_unstable();
    // From the heavy end, find where the progression breaks.
    let mut split = 0;
    for i in (1..candidates.len()).rev() {
        if candidates[i].0 < candidates[i - 1].0.saturating_mul(factor) {
            split = i + 1;
            break;
        }
    }
    if split == 0 {
        return Vec::new();
    }
    // The merged container must itself fit into the progression.
    let mut total: u64 = candidates[..split].iter().map(|(w, _)| *w).sum();
    while split < candidates.len() && candidates[split].0 < total.saturating_mul(factor) {
        total += candidates[split].0;
        split += 1;
    }
    if split < 2 {
        return Vec::new();
    }
    let mut chosen: Vec<usize> = candidates[..split].iter().map(|(_, i)| *i).collect();
    chosen.sort_unstable();
    chosen
}

/// The positions in `state.containers` a compaction may merge: those of
/// [`geometric`], leaving the live closure's containers alone.
pub fn compaction(state: &RepoState, factor: u64, max_container_bytes: u64) -> Vec<usize> {
    let in_closure = state.live_closure().map(|(_, p)| p).unwrap_or_default();
    let (positions, candidates): (Vec<usize>, Vec<ContainerRef>) = state
        .containers
        .iter()
        .enumerate()
        .filter(|(i, _)| !in_closure.contains(i))
        .map(|(i, c)| (i, c.clone()))
        .unzip();
    geometric(&candidates, factor, max_container_bytes)
        .into_iter()
        .map(|i| positions[i])
        .collect()
}

/// The work rule of automatic GC: a GC is due when the objects outside the
/// closure reach both `min_objects` and `percent` % of the closure's
/// objects, and the last GC is at least `min_interval` old. A clone walks
/// what lies outside the closure (about 2 µs an object on git/git) while a
/// GC rewrites everything (about 40 µs an object): the share bounds what a
/// clone pays beyond git's bitmaps, the floor keeps small repositories from
/// collecting after every few pushes, the interval bounds a burst of large
/// pushes to one GC. Figures: `docs/plans/0013-clones-at-every-moment.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcWork {
    /// Objects outside the closure below which a GC is never due by work.
    pub min_objects: u64,
    /// Objects outside the closure, in percent of the closure's objects,
    /// below which a GC is never due by work.
    pub percent: u64,
    /// The shortest time from one GC to the next one due by work.
    pub min_interval: Duration,
}

impl Default for GcWork {
    fn default() -> Self {
        GcWork {
            min_objects: 10_000,
            percent: 10,
            min_interval: Duration::from_secs(3600),
        }
    }
}

/// Objects in and outside the state's live closure (stored records, as the
/// containers count them; duplicates across containers count twice).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outside {
    /// Objects of live containers that are not the closure's.
    pub objects: u64,
    /// Objects of the closure's containers (0 without a live closure).
    pub closure_objects: u64,
}

/// Counts [`Outside`] on `state`; without a live closure, every object is outside.
pub fn outside_closure(state: &RepoState) -> Outside {
    let in_closure = state.live_closure().map(|(_, p)| p).unwrap_or_default();
    let mut out = Outside::default();
    for (i, c) in state.containers.iter().enumerate() {
        if in_closure.contains(&i) {
            out.closure_objects += c.objects;
        } else {
            out.objects += c.objects;
        }
    }
    out
}

/// What lies outside the closure when a GC is due by `work` on `state`
/// whose last GC ran at `last_gc` (seconds since the epoch, 0: never),
/// `now` being the time; `None` when it is not. A closed repository (every
/// object reachable, a clone sends them all without a walk) is never due,
/// nor one without a live closure: its first GC comes by the clock
/// (`Options::gc_interval`), since a GC that finds objects missing (a
/// shallow push's parents) records no closure, and the rule would then
/// rewrite the repository every interval.
pub fn gc_due_by_work(state: &RepoState, work: &GcWork, last_gc: u64, now: u64) -> Option<Outside> {
    if state.closed || state.live_closure().is_none() {
        return None;
    }
    if last_gc != 0 && last_gc.saturating_add(work.min_interval.as_secs()) > now {
        return None;
    }
    let outside = outside_closure(state);
    let share = outside.closure_objects.saturating_mul(work.percent) / 100;
    (outside.objects >= work.min_objects && outside.objects >= share).then_some(outside)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(objects: u64) -> ContainerRef {
        ContainerRef {
            id: format!("c{objects}"),
            objects,
            bytes: objects * 100,
        }
    }

    const MAX: u64 = 128 << 20;

    #[test]
    fn a_progression_is_left_alone() {
        assert!(geometric(&[c(1000), c(400), c(100), c(10)], 2, MAX).is_empty());
        assert!(geometric(&[c(5)], 2, MAX).is_empty());
        assert!(geometric(&[], 2, MAX).is_empty());
    }

    #[test]
    fn small_containers_roll_up() {
        // 1000, then three pushes of about 10: the three merge (30 < 1000 / 2).
        assert_eq!(
            geometric(&[c(1000), c(10), c(11), c(12)], 2, MAX),
            vec![1, 2, 3]
        );
        // two alike: both merge
        assert_eq!(geometric(&[c(1000), c(10), c(10)], 2, MAX), vec![1, 2]);
    }

    #[test]
    fn the_merged_weight_pulls_in_heavier_containers() {
        // 60 + 50 = 110 >= 100 / 2, so 100 joins; then 210 * 2 > 300: 300 joins too.
        assert_eq!(
            geometric(&[c(300), c(100), c(60), c(50)], 2, MAX),
            vec![0, 1, 2, 3]
        );
    }

    #[test]
    fn full_containers_stay_out() {
        let full = ContainerRef {
            id: "full".into(),
            objects: 10,
            bytes: MAX,
        };
        assert_eq!(
            geometric(&[full.clone(), full, c(5), c(5)], 2, MAX),
            vec![2, 3]
        );
    }

    fn state(objects: &[u64], closure: usize) -> RepoState {
        let containers: Vec<ContainerRef> = objects.iter().map(|&n| c(n)).collect();
        let closure = (closure > 0).then(|| gitstow_odb::state::Closure {
            tips: vec![gix_hash::ObjectId::null(gix_hash::Kind::Sha1)],
            containers: containers[..closure].iter().map(|c| c.id.clone()).collect(),
            bitmaps: true,
        });
        RepoState {
            containers,
            closure,
            ..RepoState::default()
        }
    }

    #[test]
    fn compaction_leaves_the_closure_alone() {
        // The closure's 100 would join 60 + 50 (110 >= 100 / 2); kept out, only the pushes merge.
        let s = state(&[100, 60, 50], 1);
        assert_eq!(compaction(&s, 2, MAX), vec![1, 2]);
        // Without a closure the three merge.
        let s = state(&[100, 60, 50], 0);
        assert_eq!(compaction(&s, 2, MAX), vec![0, 1, 2]);
        // A closure of two: positions map back past it.
        let s = state(&[1000, 3, 10, 11], 2);
        assert_eq!(compaction(&s, 2, MAX), vec![2, 3]);
    }

    #[test]
    fn gc_is_due_when_the_outside_passes_floor_and_share() {
        let work = GcWork {
            min_objects: 100,
            percent: 10,
            min_interval: Duration::from_secs(3600),
        };
        let now = 1_000_000;
        // 150 outside a closure of 1000: 15% and above the floor.
        let s = state(&[1000, 100, 50], 1);
        assert_eq!(
            gc_due_by_work(&s, &work, 0, now),
            Some(Outside {
                objects: 150,
                closure_objects: 1000
            })
        );
        // Under the share (150 < 10% of 2000) or the floor: not due.
        assert_eq!(
            gc_due_by_work(&state(&[2000, 100, 50], 1), &work, 0, now),
            None
        );
        assert_eq!(gc_due_by_work(&state(&[500, 90], 1), &work, 0, now), None);
        // A GC less than the interval ago: not due; just at it: due.
        assert_eq!(gc_due_by_work(&s, &work, now - 3599, now), None);
        assert!(gc_due_by_work(&s, &work, now - 3600, now).is_some());
        // Without a closure: the clock's business.
        assert_eq!(gc_due_by_work(&state(&[1000, 500], 0), &work, 0, now), None);
        // A closed repository needs no GC to clone without a walk.
        let mut closed = s.clone();
        closed.closed = true;
        assert_eq!(gc_due_by_work(&closed, &work, 0, now), None);
    }

    #[test]
    fn many_pushes_stay_logarithmic() {
        // Simulate 1,000 pushes of 7 objects each, compacting after each.
        let mut cs: Vec<ContainerRef> = Vec::new();
        let mut most = 0;
        for n in 0..1000u64 {
            cs.push(ContainerRef {
                id: format!("p{n}"),
                objects: 7,
                bytes: 700,
            });
            let merge = geometric(&cs, 2, MAX);
            if !merge.is_empty() {
                let objects = merge.iter().map(|&i| cs[i].objects).sum();
                let first = merge[0];
                let mut kept: Vec<ContainerRef> = cs
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !merge.contains(i))
                    .map(|(_, c)| c.clone())
                    .collect();
                kept.insert(
                    first.min(kept.len()),
                    ContainerRef {
                        id: format!("m{n}"),
                        objects,
                        bytes: objects * 100,
                    },
                );
                cs = kept;
            }
            most = most.max(cs.len());
        }
        assert!(most <= 11, "{most} containers");
        assert_eq!(cs.iter().map(|c| c.objects).sum::<u64>(), 7000);
    }
}

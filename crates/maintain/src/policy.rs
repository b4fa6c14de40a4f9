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
//! produce full containers again.

use gitstow_odb::state::ContainerRef;

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

//! A push's cost told apart: what any push costs whatever its size (the
//! medians of the `fixed` pushes of one small commit), and what the
//! sequential pushes of the input cost beyond that, per pack byte and per
//! object. On a small input the fixed part dominates the whole; the part
//! beyond it is what grows with the pack.

use crate::results::{median, SeqPush, Summary};

/// The fixed and per-byte parts of a push's cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Split {
    /// Successful small pushes the fixed figures are the medians of.
    pub fixed_pushes: usize,
    /// Daemon CPU of a small push, s.
    pub fixed_cpu_s: f64,
    /// RssAnon rise above the span's start of a small push, kB.
    pub fixed_rise_kb: i64,
    /// Bytes allocated by a small push (`None`: no allocation counter).
    pub fixed_allocated: Option<u64>,
    /// Successful sequential pushes the input figures are the medians of.
    pub input_pushes: usize,
    /// Daemon CPU of an input push beyond a small push's, s per MiB of pack.
    pub cpu_s_per_mib: f64,
    /// RssAnon rise above start of an input push beyond a small push's,
    /// bytes per object.
    pub rise_per_object: f64,
    /// Bytes allocated by an input push beyond a small push's, per pack byte.
    pub allocated_per_byte: Option<f64>,
}

fn ok(pushes: &[SeqPush]) -> Vec<&SeqPush> {
    pushes.iter().filter(|p| p.error.is_none()).collect()
}

/// Median of a float figure (in thousandths: CPU seconds to the ms).
fn median_f64(values: impl Iterator<Item = f64>) -> Option<f64> {
    median(
        values
            .map(|v| (v.max(0.0) * 1000.0).round() as u64)
            .collect(),
    )
    .map(|m| m as f64 / 1000.0)
}

/// The split of `s`'s figures, or `None` without a successful small push
/// and a successful sequential push.
pub fn split(s: &Summary) -> Option<Split> {
    let (fixed, input) = (ok(&s.fixed), ok(&s.seq));
    if fixed.is_empty() || input.is_empty() {
        return None;
    }
    let allocated = |ps: &[&SeqPush]| -> Option<u64> {
        median(
            ps.iter()
                .map(|p| p.span.allocated_bytes)
                .collect::<Option<Vec<_>>>()?,
        )
    };
    let fixed_cpu_s = median_f64(fixed.iter().map(|p| p.span.cpu_s))?;
    let fixed_rise_kb = median(fixed.iter().map(|p| p.span.rise_from_start_kb).collect())?;
    let fixed_allocated = allocated(&fixed);
    let input_cpu = median_f64(input.iter().map(|p| p.span.cpu_s))?;
    let input_rise_kb = median(input.iter().map(|p| p.span.rise_from_start_kb).collect())?;
    let pack = s.input.pack.pack_bytes.max(1) as f64;
    let objects = s.input.pack.objects.max(1) as f64;
    Some(Split {
        fixed_pushes: fixed.len(),
        fixed_cpu_s,
        fixed_rise_kb,
        fixed_allocated,
        input_pushes: input.len(),
        cpu_s_per_mib: (input_cpu - fixed_cpu_s).max(0.0) / (pack / 1048576.0),
        rise_per_object: (input_rise_kb - fixed_rise_kb).max(0) as f64 * 1024.0 / objects,
        allocated_per_byte: match (allocated(&input), fixed_allocated) {
            (Some(a), Some(f)) => Some(a.saturating_sub(f) as f64 / pack),
            _ => None,
        },
    })
}

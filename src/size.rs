//! Byte counts for people, as git writes them (`strbuf_humanise_bytes`,
//! used by `git count-objects -H`): `369 bytes`, `2.00 KiB`, `5.67 MiB`,
//! `1.23 GiB`.

/// `bytes` in git's human form (binary units, two decimals, truncated).
pub fn human(bytes: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    let (unit, name) = match bytes {
        b if b >= GIB => (GIB, "GiB"),
        b if b >= MIB => (MIB, "MiB"),
        b if b >= KIB => (KIB, "KiB"),
        b => return format!("{b} {}", if b == 1 { "byte" } else { "bytes" }),
    };
    let whole = bytes / unit;
    let hundredths = (bytes % unit) * 100 / unit;
    format!("{whole}.{hundredths:02} {name}")
}

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn writes_what_git_count_objects_h_writes() {
        assert_eq!(human(0), "0 bytes");
        assert_eq!(human(1), "1 byte");
        assert_eq!(human(369), "369 bytes");
        assert_eq!(human(1024), "1.00 KiB");
        assert_eq!(human(2047), "1.99 KiB");
        assert_eq!(human(5_943_488), "5.66 MiB");
        assert_eq!(human(50 << 20), "50.00 MiB");
        assert_eq!(human(3 << 30), "3.00 GiB");
    }
}

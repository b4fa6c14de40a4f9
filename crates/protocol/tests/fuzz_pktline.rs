//! Property-based fuzzing of the pkt-line reader (`PktReader::read_packet`).
//!
//! Inputs: arbitrary bytes, arbitrary sequences of packets (valid framing,
//! random payloads), and valid streams (including real git request bodies
//! from `fixtures/`) with random byte flips, truncations, insertions and
//! deletions. Properties: no panic; every packet read is at most
//! `MAX_DATA_LEN` bytes of payload; no single allocation while reading is
//! larger than `MAX_DATA_LEN` (checked with a counting global allocator);
//! the read loop ends after at most `len / 4 + 1` packets; a valid stream
//! reads back exactly as written.
//!
//! The number of cases per property is `GITSTOW_FUZZ_CASES` (default 256),
//! so the ordinary test run stays fast and a longer campaign is one
//! environment variable away.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use gitstow_fuzzkit::{config, mutate, mutation};
use gitstow_protocol::pktline::{
    write_data, write_delim, write_flush, write_response_end, Packet, PktError, PktReader,
    MAX_DATA_LEN, MAX_PKT_LEN,
};
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// A global allocator that records, for the current thread only and only while
// tracking is on, the largest single allocation requested.

struct Tracking;

thread_local! {
    static TRACK: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = TRACK.try_with(|t| {
        if t.get() {
            let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
        }
    });
}

unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Tracking = Tracking;

/// Runs `f` and returns its result with the largest single allocation it made
/// on this thread.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|l| l.set(0));
    TRACK.with(|t| t.set(true));
    let out = f();
    TRACK.with(|t| t.set(false));
    (out, LARGEST.with(|l| l.get()))
}

// ---------------------------------------------------------------------------

/// Reads packets until EOF or an error, checking the per-packet properties.
fn read_all(bytes: &[u8]) -> (Vec<Packet>, Option<PktError>) {
    let mut reader = PktReader::new(bytes);
    let mut packets = Vec::new();
    // each successful read consumes at least 4 bytes: the loop must end
    let bound = bytes.len() / 4 + 1;
    for _ in 0..=bound {
        let (res, largest) = largest_allocation(|| reader.read_packet());
        assert!(
            largest <= MAX_DATA_LEN,
            "one read allocated {largest} bytes, more than MAX_DATA_LEN"
        );
        match res {
            Ok(Some(p)) => {
                if let Packet::Data(d) = &p {
                    assert!(d.len() <= MAX_DATA_LEN);
                }
                packets.push(p);
            }
            Ok(None) => {
                // EOF is sticky
                assert!(matches!(reader.read_packet(), Ok(None)));
                return (packets, None);
            }
            Err(e) => {
                // the error renders without panicking
                let _ = e.to_string();
                return (packets, Some(e));
            }
        }
    }
    panic!("more than {bound} packets out of {} bytes", bytes.len());
}

#[derive(Debug, Clone)]
enum Pkt {
    Data(Vec<u8>),
    Flush,
    Delim,
    End,
}

fn pkt() -> impl Strategy<Value = Pkt> {
    prop_oneof![
        6 => prop::collection::vec(any::<u8>(), 0..200).prop_map(Pkt::Data),
        1 => (0usize..=MAX_DATA_LEN).prop_map(|n| Pkt::Data(vec![b'x'; n])),
        1 => Just(Pkt::Data(vec![b'm'; MAX_DATA_LEN])),
        1 => Just(Pkt::Flush),
        1 => Just(Pkt::Delim),
        1 => Just(Pkt::End),
    ]
}

fn encode(pkts: &[Pkt]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in pkts {
        match p {
            Pkt::Data(d) => write_data(&mut out, d).unwrap(),
            Pkt::Flush => write_flush(&mut out).unwrap(),
            Pkt::Delim => write_delim(&mut out).unwrap(),
            Pkt::End => write_response_end(&mut out).unwrap(),
        }
    }
    out
}

fn same(p: &Packet, q: &Pkt) -> bool {
    match (p, q) {
        (Packet::Data(a), Pkt::Data(b)) => a == b,
        (Packet::Flush, Pkt::Flush) | (Packet::Delim, Pkt::Delim) => true,
        (Packet::ResponseEnd, Pkt::End) => true,
        _ => false,
    }
}

const SEEDS: &[&[u8]] = &[
    include_bytes!("fixtures/request_push_options.pkt"),
    include_bytes!("fixtures/request_v2_ls_refs.pkt"),
    include_bytes!("fixtures/request_v2_fetch_clone.pkt"),
    include_bytes!("fixtures/request_v2_fetch_haves.pkt"),
    include_bytes!("fixtures/request_v0_fetch_deepen_first.pkt"),
    include_bytes!("fixtures/request_v0_fetch_deepen.pkt"),
    include_bytes!("fixtures/report_sideband.pkt"),
];

/// Length prefixes worth hitting on purpose.
fn header() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"0000".to_vec()),
        Just(b"0001".to_vec()),
        Just(b"0002".to_vec()),
        Just(b"0003".to_vec()),
        Just(b"0004".to_vec()),
        Just(b"fff0".to_vec()),
        Just(b"fff1".to_vec()),
        Just(b"FFFF".to_vec()),
        Just(b"fFf0".to_vec()),
        (0u32..=0xffff).prop_map(|n| format!("{n:04x}").into_bytes()),
        prop::collection::vec(any::<u8>(), 4),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        read_all(&bytes);
    }

    #[test]
    fn arbitrary_headers_and_tails(
        parts in prop::collection::vec(
            (header(), prop::collection::vec(any::<u8>(), 0..64)), 0..12),
    ) {
        let bytes: Vec<u8> = parts.into_iter().flat_map(|(h, t)| h.into_iter().chain(t)).collect();
        read_all(&bytes);
    }

    #[test]
    fn valid_streams_roundtrip(pkts in prop::collection::vec(pkt(), 0..8)) {
        let bytes = encode(&pkts);
        let (got, err) = read_all(&bytes);
        prop_assert!(err.is_none(), "{err:?}");
        prop_assert_eq!(got.len(), pkts.len());
        for (p, q) in got.iter().zip(&pkts) {
            prop_assert!(same(p, q), "{p:?} vs {q:?}");
        }
    }

    #[test]
    fn mutated_valid_streams(
        pkts in prop::collection::vec(pkt(), 1..8),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let bytes = mutate(encode(&pkts), &mutations);
        read_all(&bytes);
    }

    #[test]
    fn mutated_git_requests(
        seed in prop::sample::select(SEEDS),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let bytes = mutate(seed.to_vec(), &mutations);
        read_all(&bytes);
    }

    /// A stream that is valid up to a point reads exactly those packets and
    /// then fails or ends: what precedes the damage is never misread.
    #[test]
    fn truncated_valid_streams_read_a_prefix(
        pkts in prop::collection::vec(pkt(), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let bytes = encode(&pkts);
        let cut = cut.index(bytes.len() + 1);
        let (got, err) = read_all(&bytes[..cut]);
        prop_assert!(got.len() <= pkts.len());
        for (p, q) in got.iter().zip(&pkts) {
            prop_assert!(same(p, q), "{p:?} vs {q:?}");
        }
        if cut < bytes.len() && err.is_none() {
            // a clean EOF only at a packet boundary
            let consumed: usize = encode(&pkts[..got.len()]).len();
            prop_assert_eq!(consumed, cut);
        }
    }
}

#[test]
fn max_sized_packet_allocates_exactly_the_maximum() {
    let bytes = encode(&[Pkt::Data(vec![7; MAX_DATA_LEN])]);
    assert_eq!(bytes.len(), MAX_PKT_LEN);
    let (got, err) = read_all(&bytes);
    assert!(err.is_none());
    assert_eq!(got.len(), 1);
    // the tracker sees the payload buffer: exactly the maximum
    let (res, largest) = largest_allocation(|| PktReader::new(&bytes[..]).read_packet());
    assert!(matches!(res, Ok(Some(Packet::Data(_)))));
    assert_eq!(largest, MAX_DATA_LEN);
    // one byte more than the maximum is refused before any allocation
    let (res, largest) = largest_allocation(|| PktReader::new(&b"fff1"[..]).read_packet());
    assert!(matches!(res, Err(PktError::TooLong { .. })));
    assert!(largest < 1024, "{largest}");
}

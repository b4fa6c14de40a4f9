//! Caps on connections, in total and per client address, shared by the
//! transports: HTTP counts every open connection (`--max-connections`,
//! `--max-connections-per-address`), SSH the ones not authenticated yet
//! (`--ssh-max-startups`, `--ssh-max-startups-per-source`, as sshd's
//! `MaxStartups` and `PerSourceMaxStartups`).
//!
//! SSH also drops at random before its total cap, as sshd's `MaxStartups
//! start:rate:full` does ([`EarlyDrop`]): a flood that nears the cap meets
//! refusals it cannot predict, on its own connections too, rather than one
//! hard edge that shuts everyone out at once.
//!
//! A client address is counted by its network block as sshd's
//! `PerSourceNetBlockSize` and most rate limiters count it: an IPv4 address
//! alone, an IPv6 address by its /64 (one host, or one customer's link,
//! holds a whole /64), an IPv4-mapped IPv6 address as the IPv4 one.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

/// Which cap a connection met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapReached {
    /// The cap on all connections.
    Total,
    /// The cap on connections from the client's address block.
    Source,
}

impl CapReached {
    /// The reason, in the words a client or the log is given.
    pub fn reason(self) -> &'static str {
        match self {
            CapReached::Total => "too many connections to this server",
            CapReached::Source => "too many connections from your address",
        }
    }
}

/// sshd's random early drop (`MaxStartups start:rate:full`, sshd_config(5)):
/// with `start` connections held, a new one is refused with a probability
/// of `rate_percent` %, rising linearly to all at the total cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EarlyDrop {
    /// Connections held from which new ones may be dropped.
    pub start: usize,
    /// The chance of a drop at `start`, in percent.
    pub rate_percent: u32,
}

impl EarlyDrop {
    /// The drop sshd's defaults (10:30:100) make for a total cap of
    /// `total`, started at half the cap rather than a tenth, and never
    /// below sshd's 10: one address at its own cap (10 of 100 by default)
    /// leaves everyone else's logins alone; five or more addresses flooding
    /// together start the drops; a cap of 10 or less is a plain cap.
    pub fn half_of(total: usize) -> EarlyDrop {
        EarlyDrop {
            start: (total / 2).max(10),
            rate_percent: 30,
        }
    }

    /// The chance, in percent, that a new connection is dropped when
    /// `held` of a total cap of `total` are held.
    pub fn chance_percent(&self, held: usize, total: usize) -> u32 {
        if held < self.start || total <= self.start {
            return 0;
        }
        let over = (held - self.start).min(total - self.start) as u64;
        let span = (total - self.start) as u64;
        let rate = u64::from(self.rate_percent.min(100));
        (rate + (100 - rate) * over / span) as u32
    }
}

/// The counts behind a set of caps.
#[derive(Debug, Default)]
struct Open {
    total: usize,
    by_source: HashMap<IpAddr, usize>,
}

/// Connections open under caps of `total` in all and `per_source` from one
/// address block; cheap to clone (the counts are shared).
#[derive(Debug, Clone)]
pub struct ConnCaps {
    open: Arc<Mutex<Open>>,
    total: usize,
    per_source: usize,
    early_drop: Option<EarlyDrop>,
}

impl ConnCaps {
    /// Caps of `total` connections in all and `per_source` from one
    /// address block (a value of 0 admits nothing).
    pub fn new(total: usize, per_source: usize) -> Self {
        ConnCaps {
            open: Arc::default(),
            total,
            per_source,
            early_drop: None,
        }
    }

    /// The caps: (in all, from one address block).
    pub fn limits(&self) -> (usize, usize) {
        (self.total, self.per_source)
    }

    /// These caps, with connections dropped at random before the total cap
    /// is reached ([`ConnCaps::admit_rolled`]).
    pub fn with_early_drop(mut self, drop: EarlyDrop) -> Self {
        self.early_drop = Some(drop);
        self
    }

    /// Takes a slot for a connection from `source` (`None`: counted in the
    /// total only, e.g. a trusted proxy's connection before its PROXY
    /// header names the client), or says which cap is reached. The slot is
    /// given back when the [`Held`] is dropped.
    pub fn admit(&self, source: Option<IpAddr>) -> Result<Held, CapReached> {
        self.admit_rolled(source, 100)
    }

    /// [`ConnCaps::admit`], where `roll` (uniform in 0..100) decides an
    /// early drop: the connection is refused ([`CapReached::Total`]) when
    /// `roll` is below [`EarlyDrop::chance_percent`]. A roll of 100 never
    /// drops.
    pub fn admit_rolled(&self, source: Option<IpAddr>, roll: u32) -> Result<Held, CapReached> {
        let mut o = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if o.total >= self.total {
            return Err(CapReached::Total);
        }
        if let Some(drop) = &self.early_drop {
            if roll < drop.chance_percent(o.total, self.total) {
                return Err(CapReached::Total);
            }
        }
        let block = source.map(block_of);
        if let Some(block) = block {
            if o.by_source.get(&block).copied().unwrap_or(0) >= self.per_source {
                return Err(CapReached::Source);
            }
            *o.by_source.entry(block).or_insert(0) += 1;
        }
        o.total += 1;
        Ok(Held {
            open: self.open.clone(),
            block,
        })
    }

    /// Counts a held slot against `source`'s block from now on (the client
    /// a PROXY header named), or says its cap is reached (the slot is then
    /// given back when `held` is dropped, as before).
    pub fn attribute(&self, held: &mut Held, source: IpAddr) -> Result<(), CapReached> {
        let block = block_of(source);
        if held.block == Some(block) {
            return Ok(());
        }
        let mut o = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if o.by_source.get(&block).copied().unwrap_or(0) >= self.per_source {
            return Err(CapReached::Source);
        }
        *o.by_source.entry(block).or_insert(0) += 1;
        if let Some(old) = held.block.replace(block) {
            release(&mut o, old);
        }
        Ok(())
    }

    /// Connections held now, in total.
    #[cfg(test)]
    fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).total
    }
}

/// A slot of a [`ConnCaps`], held for as long as the connection counts.
#[derive(Debug)]
pub struct Held {
    open: Arc<Mutex<Open>>,
    block: Option<IpAddr>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut o = self.open.lock().unwrap_or_else(|e| e.into_inner());
        o.total -= 1;
        if let Some(block) = self.block {
            release(&mut o, block);
        }
    }
}

fn release(o: &mut Open, block: IpAddr) {
    if let Some(n) = o.by_source.get_mut(&block) {
        *n -= 1;
        if *n == 0 {
            o.by_source.remove(&block);
        }
    }
}

/// The block an address is counted in: IPv4 as is, IPv6 by its /64, an
/// IPv4-mapped IPv6 address as the IPv4 one.
pub fn block_of(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn caps_count_in_total_and_per_source_block() {
        let caps = ConnCaps::new(3, 2);
        let a1 = caps.admit(Some(ip("10.0.0.1"))).unwrap();
        let _a2 = caps.admit(Some(ip("10.0.0.1"))).unwrap();
        assert_eq!(
            caps.admit(Some(ip("10.0.0.1"))).err(),
            Some(CapReached::Source)
        );
        let _b = caps.admit(Some(ip("10.0.0.2"))).unwrap();
        assert_eq!(
            caps.admit(Some(ip("10.0.0.3"))).err(),
            Some(CapReached::Total)
        );
        drop(a1);
        assert_eq!(caps.open(), 2);
        let _a3 = caps.admit(Some(ip("10.0.0.1"))).unwrap();
    }

    #[test]
    fn early_drops_start_at_half_the_cap_and_rise_to_all_at_the_cap() {
        let early = EarlyDrop::half_of(100);
        assert_eq!(early.chance_percent(0, 100), 0);
        assert_eq!(early.chance_percent(49, 100), 0);
        assert_eq!(early.chance_percent(50, 100), 30);
        assert_eq!(early.chance_percent(75, 100), 65);
        assert_eq!(early.chance_percent(100, 100), 100);
        // small caps are plain caps; drops start at 10 held at the earliest
        assert_eq!(EarlyDrop::half_of(1).chance_percent(0, 1), 0);
        assert_eq!(EarlyDrop::half_of(2).chance_percent(1, 2), 0);
        assert_eq!(EarlyDrop::half_of(10).chance_percent(9, 10), 0);
        assert_eq!(EarlyDrop::half_of(12).chance_percent(9, 12), 0);
        assert_eq!(EarlyDrop::half_of(12).chance_percent(10, 12), 30);
        let caps = ConnCaps::new(100, 10).with_early_drop(early);
        // one address at its own cap: no drop for anyone else
        let held: Vec<Held> = (0..10)
            .map(|_| caps.admit_rolled(Some(ip("10.0.0.1")), 0).unwrap())
            .collect();
        let other = caps.admit_rolled(Some(ip("10.0.0.2")), 0).unwrap();
        drop(other);
        // five more addresses: half the cap, a roll under 30 is dropped
        let more: Vec<Held> = (0..40)
            .map(|i| {
                caps.admit_rolled(Some(ip(&format!("10.0.1.{}", i / 10))), 99)
                    .unwrap()
            })
            .collect();
        assert_eq!(caps.open(), 50);
        assert_eq!(
            caps.admit_rolled(Some(ip("10.0.0.9")), 29).err(),
            Some(CapReached::Total)
        );
        let _kept = caps.admit_rolled(Some(ip("10.0.0.9")), 30).unwrap();
        // and admit() (a roll of 100) never drops early
        let _also = caps.admit(Some(ip("10.0.0.8"))).unwrap();
        drop((held, more));
    }

    #[test]
    fn an_ipv6_client_is_counted_by_its_64() {
        let caps = ConnCaps::new(10, 1);
        let _a = caps.admit(Some(ip("2001:db8:1:2::1"))).unwrap();
        assert_eq!(
            caps.admit(Some(ip("2001:db8:1:2:ffff::9"))).err(),
            Some(CapReached::Source)
        );
        let _b = caps.admit(Some(ip("2001:db8:1:3::1"))).unwrap();
        let _c = caps.admit(Some(ip("::ffff:10.0.0.1"))).unwrap();
        assert_eq!(
            caps.admit(Some(ip("10.0.0.1"))).err(),
            Some(CapReached::Source)
        );
    }

    #[test]
    fn a_proxied_slot_is_attributed_to_the_client_it_names() {
        let caps = ConnCaps::new(10, 1);
        let mut via_proxy = caps.admit(None).unwrap();
        let mut second = caps.admit(None).unwrap();
        caps.attribute(&mut via_proxy, ip("192.0.2.7")).unwrap();
        assert_eq!(
            caps.attribute(&mut second, ip("192.0.2.7")),
            Err(CapReached::Source)
        );
        assert_eq!(
            caps.admit(Some(ip("192.0.2.7"))).err(),
            Some(CapReached::Source)
        );
        drop(via_proxy);
        drop(second);
        assert_eq!(caps.open(), 0);
        let _again = caps.admit(Some(ip("192.0.2.7"))).unwrap();
    }
}

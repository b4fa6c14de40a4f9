//! Big objects, one at a time in the whole process.
//!
//! Resolving a delta holds its base and its result whole (both are needed
//! until the result is hashed), so a thread resolving a 1 GiB blob and its
//! delta child holds 2 GiB; every resolver thread of every push doing so at
//! once multiplied that (two such blobs on two threads: 4.2 GB, more than
//! git's index-pack at 3.5 GB; issue 42, finding 9). Here a thread takes the
//! process's one [`BigObjects`] turn before it inflates a base or makes a
//! result of [`BIG_OBJECT_BYTES`] or more, and keeps it for the rest of
//! that base's subtree; the others go on with small objects or wait. So
//! big objects add about twice the largest of them to the server's memory,
//! however many pushes and threads there are, and a push of small objects
//! keeps its budget (threads × two objects under [`BIG_OBJECT_BYTES`]).
//!
//! A thread that holds the turn never waits for another thread, so the wait
//! cannot deadlock.

use std::sync::{Condvar, Mutex};

/// Objects of this many bytes or more are resolved one subtree at a time in
/// the whole process: 64 MiB.
pub const BIG_OBJECT_BYTES: u64 = 64 << 20;

/// The process's turn for big objects.
#[derive(Debug, Default)]
pub struct BigObjects {
    busy: Mutex<bool>,
    free: Condvar,
}

/// The turn, given back when dropped.
#[derive(Debug)]
pub struct Turn<'a> {
    gate: &'a BigObjects,
}

impl BigObjects {
    /// Waits for the turn (blocking the calling thread) and takes it.
    pub fn take(&self) -> Turn<'_> {
        let mut busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        while *busy {
            busy = self.free.wait(busy).unwrap_or_else(|p| p.into_inner());
        }
        *busy = true;
        Turn { gate: self }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        *self.gate.busy.lock().unwrap_or_else(|p| p.into_inner()) = false;
        self.gate.free.notify_one();
    }
}

/// The one gate of the process.
pub static BIG_OBJECTS: BigObjects = BigObjects {
    busy: Mutex::new(false),
    free: Condvar::new(),
};

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn one_turn_at_a_time() {
        let gate = BigObjects::default();
        let inside = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..50 {
                        let _turn = gate.take();
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                });
            }
        });
        assert_eq!(most.load(Ordering::SeqCst), 1);
    }
}

//! Many simulated runs on every core: seeds S, S+1, … dealt to worker threads as they free
//! up, each run handed back as it finishes. One loop for `fle-chaos simulate` and its benches.

use super::run::{simulate_one, SimRun, SimSettings};
use std::sync::atomic::{AtomicU64, Ordering};

/// Runs seeds `first`, `first + 1`, … on `parallel` threads until `count` runs have started
/// or `go_on` (asked before each start) says stop; hands each finished run and its seed to
/// `each`, in the order they finish.
pub fn run_seeds(
    s: &SimSettings,
    first: u64,
    count: u64,
    parallel: usize,
    go_on: impl Fn() -> bool + Sync,
    each: impl Fn(u64, SimRun) + Sync,
) {
    let next = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..parallel.max(1) {
            scope.spawn(|| {
                while go_on() {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        return;
                    }
                    let seed = first.wrapping_add(i);
                    each(seed, simulate_one(s, seed));
                }
            });
        }
    });
}

//! What two tests of this binary must not use at once. Every test here runs beside every other
//! (two at a time on two cores), so a test that needs something of this machine to itself says
//! so by holding its guard, for as long as it uses it; nothing relies on living in a binary of
//! its own.

use std::sync::{Mutex, MutexGuard};

/// A resource of this machine that one test at a time may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exclusive {
    /// The cores, for a test that measures recovery times or runs a JVM ensemble or qemu
    /// guests: two such at once on a 2-core machine make load, not the fault, the thing under
    /// test (ZOOKEEPER-2846's 5-server run beside two 3-server runs missed its divergence twice
    /// in two tries; a local ensemble beside an SSH one took no write in its whole run).
    HeavyCluster,
    /// PID 1's orphans and dead runs' leftovers: a test that SIGKILLs a controller leaves its
    /// nodes to PID 1 until `clean`, and the SSH backend's nodes are daemons on their hosts (the
    /// fake VMs are namespaces here), left to PID 1 by their teardown; where PID 1 does not reap
    /// (a container's), a test counting `<defunct>` orphans would see either. And a `clean` must
    /// not meet a run that is still tearing down. Taken after `HeavyCluster` by a test that
    /// holds both.
    DeadRuns,
}

static HEAVY_CLUSTER: Mutex<()> = Mutex::new(());
static DEAD_RUNS: Mutex<()> = Mutex::new(());

/// A test's hold on a resource, released when dropped. It is held for the whole test, across
/// its awaits too: the only other holders are other tests, each on a thread of its own, so
/// waiting blocks only the test that has to wait.
pub struct Held {
    _guard: MutexGuard<'static, ()>,
}

/// Waits until no other test holds `what` (a test that panicked while holding it poisons
/// nothing: the next one takes it).
pub fn hold(what: Exclusive) -> Held {
    let lock = match what {
        Exclusive::HeavyCluster => &HEAVY_CLUSTER,
        Exclusive::DeadRuns => &DEAD_RUNS,
    };
    Held {
        _guard: lock.lock().unwrap_or_else(|e| e.into_inner()),
    }
}

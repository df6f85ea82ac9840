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
    what: Exclusive,
    _guard: MutexGuard<'static, ()>,
}

impl Drop for Held {
    fn drop(&mut self) {
        log_hold(self.what, "released");
    }
}

/// With `FLC_TEST_HOLDS=FILE`, each take and release of a resource is appended to FILE
/// (Unix seconds, the test, the resource, what happened): how long each test held the cores,
/// which the suite's wall time cannot be shorter than in sum (docs/testing.md, Time).
fn log_hold(what: Exclusive, event: &str) {
    let Some(path) = std::env::var_os("FLC_TEST_HOLDS") else {
        return;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    let thread = std::thread::current();
    let line = format!(
        "{now:.2} {} {what:?} {event}\n",
        thread.name().unwrap_or("?")
    );
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    if let Ok(mut file) = file {
        use std::io::Write;
        let _ = file.write_all(line.as_bytes());
    }
}

/// Waits until no other test holds `what` (a test that panicked while holding it poisons
/// nothing: the next one takes it).
pub fn hold(what: Exclusive) -> Held {
    let lock = match what {
        Exclusive::HeavyCluster => &HEAVY_CLUSTER,
        Exclusive::DeadRuns => &DEAD_RUNS,
    };
    log_hold(what, "waiting");
    let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
    log_hold(what, "taken");
    Held {
        what,
        _guard: guard,
    }
}

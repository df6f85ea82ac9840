//! Reaping what the controller starts, so that no process of a run is left `<defunct>`.
//!
//! The nodes are the controller's own children and `LocalCluster` waits for each. A lazyfs
//! filesystem is not: `fle-node lazyfs mount --daemon-log` forks it and exits, so it would be
//! re-parented to PID 1 and, once unmounted at teardown, wait there as a zombie until PID 1
//! reaps it (seconds after `fle-chaos test` exits, or never in a container whose PID 1 does not
//! reap). So the controller makes itself the child subreaper of what it starts
//! (`PR_SET_CHILD_SUBREAPER`: orphans of its descendants come to it instead of PID 1), and
//! teardown waits for exactly the pids it adopted this way, by pid, never `waitpid(-1)`, which
//! would take the exit status of a child someone else (std, tokio) is waiting for.

use nix::errno::Errno;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

/// Orphans of this process's descendants are re-parented to it from now on.
pub fn adopt_orphans() {
    // SAFETY: prctl with integer arguments only.
    let _ = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
}

/// A process re-parented to us, as `adopt` saw it: its pid and start time (clock ticks since
/// boot), so a pid reused by another of our children is never waited for in its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adopted {
    pub pid: u32,
    pub start_time: u64,
}

impl Adopted {
    /// `pid` as it runs now, if it does.
    pub fn of(pid: u32) -> Option<Adopted> {
        crate::control::backend::registry::process_start_time(pid)
            .map(|start_time| Adopted { pid, start_time })
    }

    /// Whether it is still that process and our child (adopted through the subreaper).
    fn ours(&self) -> bool {
        use crate::control::backend::registry::{process_parent, process_start_time};
        process_parent(self.pid) == Some(std::process::id())
            && process_start_time(self.pid) == Some(self.start_time)
    }
}

/// Waits until each of `adopted` has ended and is reaped, up to `within`; one that is not our
/// child (no subreaper: PID 1 took it; or gone) is done without a wait, so no other child's
/// status is ever taken. Returns those still running at the deadline.
pub fn reap(adopted: &[Adopted], within: Duration) -> Vec<Adopted> {
    let deadline = Instant::now() + within;
    let mut left: Vec<Adopted> = adopted.to_vec();
    loop {
        left.retain(|a| {
            if !a.ours() {
                return false;
            }
            match waitpid(Pid::from_raw(a.pid as i32), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => true,
                Err(Errno::EINTR) => true,
                // Reaped now, or not ours after all (ECHILD).
                _ => false,
            }
        });
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn an_orphaned_grandchild_is_adopted_and_reaped_by_pid() {
        adopt_orphans();
        // sh forks a sleeper (its output elsewhere, so `output` returns at once), prints its
        // pid and exits: the sleeper, still running, is orphaned to us.
        let out = Command::new("sh")
            .args(["-c", "sleep 0.3 >/dev/null 2>&1 & echo $!"])
            .output()
            .unwrap();
        let pid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let a = Adopted::of(pid).expect("the sleeper runs");
        assert!(a.ours(), "not re-parented to us");
        assert_eq!(reap(&[a], Duration::from_secs(10)), Vec::<Adopted>::new());
        // Reaped: no /proc entry, not even a zombie's.
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
        // A process that is no child of ours is done at once, never waited for.
        let init = Adopted::of(1).unwrap();
        assert!(reap(&[init], Duration::from_secs(10)).is_empty());
    }
}

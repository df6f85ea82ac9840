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

/// Waits until each of `pids` (processes re-parented to this one) has ended and is reaped, up
/// to `within`; a pid that is not our child (no subreaper, or already reaped) is done. Returns
/// the pids still running at the deadline.
pub fn reap(pids: &[u32], within: Duration) -> Vec<u32> {
    let deadline = Instant::now() + within;
    let mut left: Vec<u32> = pids.to_vec();
    loop {
        left.retain(|&pid| {
            match waitpid(Pid::from_raw(pid as i32), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => true,
                Err(Errno::EINTR) => true,
                // Reaped now, or not ours to reap (ECHILD).
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
        // sh forks a sleeper, prints its pid and exits: the sleeper is orphaned to us.
        let out = Command::new("sh")
            .args(["-c", "sleep 0.3 & echo $!"])
            .output()
            .unwrap();
        let pid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let ppid = |pid: u32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')')?
                        .1
                        .split_whitespace()
                        .nth(1)?
                        .parse::<u32>()
                        .ok()
                })
        };
        assert_eq!(ppid(pid), Some(std::process::id()), "not re-parented to us");
        assert_eq!(reap(&[pid], Duration::from_secs(10)), Vec::<u32>::new());
        // Reaped: no /proc entry, not even a zombie's.
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
        // A pid that is no child of ours is done at once.
        assert!(reap(&[1], Duration::from_secs(10)).is_empty());
    }
}

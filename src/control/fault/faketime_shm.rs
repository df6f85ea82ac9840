//! What libfaketime leaves in /dev/shm when a node of ours is SIGKILLed.
//!
//! libfaketime 0.9.x gives every process it is preloaded into a POSIX semaphore and a shared
//! memory object named after its pid (`/dev/shm/sem.faketime_sem_<pid>`,
//! `/dev/shm/faketime_shm_<pid>`), and removes them only when the process exits cleanly. A node
//! killed by the nemesis or by teardown leaves the pair: a 20 s run left 10 pairs, and a
//! nightly job would pile up thousands. They are the tool's (made by processes it started), so
//! it removes them, but only a dead process's pair made while that process ran: a later process
//! with the same pid makes newer files, which are not ours.

use crate::control::backend::registry::{is_same_process, process_started_at};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Where POSIX shared memory and named semaphores live.
const SHM: &str = "/dev/shm";

/// The start time's resolution (boot time in whole seconds, ticks of 10 ms): how much earlier
/// than the computed start a file of the process may look.
const START_SLACK: Duration = Duration::from_secs(2);

/// libfaketime's pair for `pid`, under `dir`.
fn pair(dir: &Path, pid: u32) -> [PathBuf; 2] {
    [
        dir.join(format!("faketime_shm_{pid}")),
        dir.join(format!("sem.faketime_sem_{pid}")),
    ]
}

/// Removes the pair of the process `pid` that started at `start_time` (clock ticks after boot,
/// as the registry records it) if that process is gone; returns what it removed.
pub fn remove_pair_of(pid: u32, start_time: u64) -> Vec<PathBuf> {
    if is_same_process(pid, start_time) {
        return Vec::new();
    }
    let Some(started) = process_started_at(start_time) else {
        return Vec::new();
    };
    remove_made_between(
        Path::new(SHM),
        pid,
        started - START_SLACK,
        SystemTime::now(),
    )
}

/// Removes `pid`'s pair under `dir` where each file was last changed within `[from, to]`.
fn remove_made_between(dir: &Path, pid: u32, from: SystemTime, to: SystemTime) -> Vec<PathBuf> {
    pair(dir, pid)
        .into_iter()
        .filter(|f| {
            std::fs::metadata(f)
                .and_then(|m| m.modified())
                .is_ok_and(|t| from <= t && t <= to)
        })
        .filter(|f| std::fs::remove_file(f).is_ok())
        .collect()
}

/// For tests: a `sleep 30` under libfaketime, once its /dev/shm pair exists, with that pair;
/// None (after saying SKIPPED) where libfaketime is not installed. `dir` holds its control file.
#[cfg(test)]
pub fn sleeper_with_pair(dir: &Path) -> Option<(std::process::Child, [PathBuf; 2])> {
    use std::time::Instant;
    let lib = crate::control::fault::faketime::LIBFAKETIME;
    if !Path::new(lib).exists() {
        crate::test_skip::skip(
            "faketime_shm",
            &format!("{lib} missing (apt-get install libfaketime)"),
        );
        return None;
    }
    let file = crate::control::fault::faketime::prepare(dir).unwrap();
    let child = std::process::Command::new("sleep")
        .arg("30")
        .envs(crate::control::fault::faketime::env(&file))
        .spawn()
        .unwrap();
    let pair = pair(Path::new(SHM), child.id());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pair.iter().all(|f| f.exists()) {
        assert!(Instant::now() < deadline, "libfaketime made no {pair:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    Some((child, pair))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_pair_made_while_the_process_ran_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let [shm, sem] = pair(dir.path(), 4242);
        std::fs::write(&shm, b"12345678").unwrap();
        std::fs::write(&sem, b"").unwrap();
        let made = std::fs::metadata(&shm).unwrap().modified().unwrap();
        let hour = Duration::from_secs(3600);
        // Made before the process started, or after it was seen gone: another process's.
        assert!(remove_made_between(dir.path(), 4242, made + hour, made + 2 * hour).is_empty());
        assert!(remove_made_between(dir.path(), 4242, made - 2 * hour, made - hour).is_empty());
        assert!(shm.exists() && sem.exists());
        // Another pid's pair is never looked at.
        assert!(remove_made_between(dir.path(), 4243, made - hour, made + hour).is_empty());
        let removed = remove_made_between(dir.path(), 4242, made - hour, made + hour);
        assert_eq!(removed, vec![shm.clone(), sem.clone()]);
        assert!(!shm.exists() && !sem.exists());
    }
}

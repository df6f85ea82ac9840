//! Controller cost of observation: CPU (% of one core) and peak RSS of `fle-chaos test` while
//! it observes 5 and then 9 real fle-node processes at 50 Hz each (workload election, no
//! faults). Goal: under 10% of one core and 64 MiB.
//!
//! CPU is the controller's own utime+stime (/proc/PID/stat, children excluded) over a window
//! inside the steady part of the run; RSS is VmHWM. It also prints the achieved read rate.
//! `FLE_CHAOS_BENCH_SECS` (default 60) sets the run length; `FLE_CHAOS_TEST_NODE` another
//! fle-node build. Runs in namespaces as root, else on loopback.
#![allow(
    clippy::too_many_lines,
    reason = "tests and benches read as scripts, top to bottom"
)]

use fle_chaos::history::store::read_history;
use fle_chaos::history::{EventType, F};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn ticks_per_second() -> f64 {
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}

/// utime + stime of the process itself, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    // Fields 14 and 15 of stat are at 11 and 12 after the state field.
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / ticks_per_second()
}

fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn bench(nodes: u32, secs: u64, node_binary: &str, out: &Path) {
    let net = if fle_chaos::control::is_root() {
        "netns"
    } else {
        "loopback"
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_fle-chaos"))
        .args(["test", "--nodes", &nodes.to_string()])
        .args(["--time-limit", &secs.to_string(), "--nemesis", "none"])
        .args([
            "--workload",
            "election",
            "--net",
            net,
            "--recovery-timeout",
            "5",
        ])
        .arg("--node-binary")
        .arg(node_binary)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // The window starts once observation is under way and ends before the final phase.
    let history = || fle_chaos::history::file::in_run(&out.join("latest"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(history()).map(|m| m.len()).unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline, "the run never started observing");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    let (c0, t0) = (cpu_seconds(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(secs.saturating_sub(5).max(1)));
    let (c1, wall) = (cpu_seconds(pid), t0.elapsed().as_secs_f64());
    let hwm = status_kib(pid, "VmHWM:");
    child.wait().unwrap();
    let events = read_history(&history()).unwrap();
    let reads = events.iter().filter(|e| e.f == F::Status).count();
    let ok = events
        .iter()
        .filter(|e| e.f == F::Status && e.kind == EventType::Ok)
        .count();
    let observed_s = events
        .iter()
        .filter(|e| e.f == F::Status)
        .map(|e| e.time)
        .max()
        .unwrap_or(0) as f64
        / 1e9;
    println!(
        "observe {nodes} nodes ({net}) at 50 Hz for {secs} s: controller CPU {:.1}% of one core, \
         peak RSS {:.1} MiB; {:.1} reads/s per node ({ok} ok of {reads})",
        100.0 * (c1 - c0) / wall,
        hwm as f64 / 1024.0,
        reads as f64 / nodes as f64 / observed_s.max(1e-9),
    );
}

fn main() {
    let secs: u64 = std::env::var("FLE_CHAOS_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let node = std::env::var("FLE_CHAOS_TEST_NODE").unwrap_or_else(|_| {
        fle_chaos::control::sut::fle_node::built_binary()
            .to_string_lossy()
            .into_owned()
    });
    let tmp = tempfile::tempdir().unwrap();
    for nodes in [5, 9] {
        bench(nodes, secs, &node, &tmp.path().join(format!("n{nodes}")));
    }
}

//! Verdicts of the default writes test, end to end: runs `fle-chaos test --workload writes`
//! (5 nodes, 60 s, the default mixed faults, netns) N times on the correct fle-node and prints
//! each run's exit code and final-phase time, then the tally and the median final phase.
//! A correct system must come out valid every time: an `unknown` here is the tool's failure to
//! defend a verdict (issue 14).
//!
//! `cargo bench --bench verdicts` (root: namespaces). Environment: FLC_RUNS [20],
//! FLC_TIME_LIMIT [60], FLC_NODES [5], FLC_SEED [1; run i uses SEED+i], FLC_OUT [a temporary
//! folder, removed at the end; set it to keep the runs].
//!
//! The final phase is measured in each run's history: from the final heal's invoke to the last
//! final-log read (restart of killed nodes, the settle wait, the final reads).
#![allow(
    clippy::too_many_lines,
    reason = "tests and benches read as scripts, top to bottom"
)]

mod support;
use support::{env_or, median};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Milliseconds from the final heal's invoke to the last final-log event of a history.
fn final_phase_ms(run: &Path) -> Option<f64> {
    let text = fle_chaos::history::file::read_text(&fle_chaos::history::file::in_run(run)).ok()?;
    let (mut heal, mut last_read) = (None, None);
    for line in text.lines() {
        let Ok(e) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let t = e["time"].as_u64()?;
        if e["process"] == "nemesis" && e["value"]["final"] == true && heal.is_none() {
            heal = Some(t);
        }
        if e["f"] == "final-log" {
            last_read = Some(t);
        }
    }
    Some((last_read? - heal?) as f64 / 1e6)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !fle_chaos::control::is_root() {
        eprintln!("SKIPPED verdicts bench: needs root (network namespaces)");
        return;
    }
    let runs: u32 = env_or("FLC_RUNS", 20);
    let time_limit: u32 = env_or("FLC_TIME_LIMIT", 60);
    let nodes: u32 = env_or("FLC_NODES", 5);
    let seed: u64 = env_or("FLC_SEED", 1);
    let tmp = tempfile::Builder::new()
        .prefix("flc-bench-verdicts-")
        .tempdir()
        .unwrap();
    let out: PathBuf = std::env::var("FLC_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|_| tmp.path().to_path_buf());
    let bin = env!("CARGO_BIN_EXE_fle-chaos");
    let node = fle_chaos::control::sut::fle_node::built_binary();
    println!(
        "verdicts bench, {} UTC: {runs} runs of `fle-chaos test --workload writes --nodes {nodes} \
         --time-limit {time_limit}` (mixed faults), seeds {seed}..",
        chrono::Utc::now().format("%Y-%m-%d %H:%M")
    );
    let (mut valid, mut invalid, mut unknown, mut other) = (0, 0, 0, 0);
    let mut phases = Vec::new();
    for i in 0..runs {
        let run_seed = seed + u64::from(i);
        let started = Instant::now();
        let status = Command::new(bin)
            .args(["test", "--workload", "writes", "--name", "bench-verdicts"])
            .args(["--nodes", &nodes.to_string()])
            .args(["--time-limit", &time_limit.to_string()])
            .args(["--seed", &run_seed.to_string(), "--node-binary"])
            .arg(&node)
            .arg("--out")
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("fle-chaos runs");
        let code = status.code().unwrap_or(-1);
        let run = out.join("latest").canonicalize().ok();
        let phase = run.as_deref().and_then(final_phase_ms);
        match code {
            0 => valid += 1,
            1 => invalid += 1,
            2 => unknown += 1,
            _ => other += 1,
        }
        phases.extend(phase);
        println!(
            "run {:>2} seed {run_seed}: exit {code} ({}), final phase {}, {:.0} s, {}",
            i + 1,
            match code {
                0 => "valid",
                1 => "invalid",
                2 => "unknown",
                _ => "not judged",
            },
            phase.map_or("-".into(), |p| format!("{p:.0} ms")),
            started.elapsed().as_secs_f64(),
            run.map_or("no run folder".into(), |r| r.display().to_string())
        );
    }
    println!(
        "runs {runs}: valid {valid}, invalid {invalid}, unknown {unknown}, other {other}; \
         median final phase {}",
        median(phases).map_or("-".into(), |m| format!("{m:.0} ms"))
    );
}

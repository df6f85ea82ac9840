//! Renders the report of a synthetic 1-hour, 9-node run (50 Hz observers, writes, a fault
//! every minute: about 1.6 M events) and prints how long it took, in wall and CPU seconds
//! (the machine may be shared: CPU time says more about the code than about the neighbours).
//! Goal: under 5 s.
//!
//! `cargo bench --bench report` (FLC_BENCH_HOURS=0.1 for a quick look; FLC_BENCH_DIR=dir to
//! keep the generated run there and reuse it on later runs).
#![allow(
    clippy::too_many_lines,
    reason = "tests and benches read as scripts, top to bottom"
)]

// Test support shared with the report tests: the synthetic history writer.
#[allow(dead_code)]
#[path = "../tests/it/support/report/fixture.rs"]
mod fixture;

use fixture::{write_run, FixtureSpec};
mod support;
use std::time::Instant;
use support::cpu_s;

fn main() -> anyhow::Result<()> {
    let hours: f64 = std::env::var("FLC_BENCH_HOURS")
        .ok()
        .and_then(|h| h.parse().ok())
        .unwrap_or(1.0);
    let temp = tempfile::tempdir()?;
    let root = std::env::var_os("FLC_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| temp.path().to_path_buf());
    // 9 nodes, 50 Hz observers: about 1.6 M events an hour.
    let spec = FixtureSpec {
        nodes: 9,
        duration_s: 3600.0 * hours,
        write_every_ms: 100,
        fault_every_s: 60.0,
        fault_len_s: 20.0,
        ..FixtureSpec::small(&format!("bench-{hours}h"))
    };
    let started = Instant::now();
    let run_dir = std::fs::read_dir(root.join(&spec.name))
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .map(|e| e.path())
        .filter(|d| fle_chaos::history::file::exists_in(d));
    let run_dir = match run_dir {
        Some(d) => {
            println!("reusing {}", d.display());
            d
        }
        None => {
            let fx = write_run(&root, &spec)?;
            println!(
                "history: {} events, {} faults (generated in {:.1} s)",
                fx.events,
                fx.faults,
                started.elapsed().as_secs_f64()
            );
            fx.run_dir
        }
    };
    let bytes = std::fs::metadata(fle_chaos::history::file::in_run(&run_dir))?.len();
    println!(
        "history: {:.0} MB, {} nodes, {:.0} s of run",
        bytes as f64 / 1e6,
        spec.nodes,
        spec.duration_s,
    );
    let (started, cpu) = (Instant::now(), cpu_s());
    let stored = fle_chaos::store::RunDir::open(&run_dir)?;
    let (run, lines) = fle_chaos::checker::load_run::<fle_chaos::report::scan::LineFold>(&stored)?;
    println!(
        "  of which the one pass (digest and the report's fold): {:.2} s, {:.2} s CPU ({} events)",
        started.elapsed().as_secs_f64(),
        cpu_s() - cpu,
        lines.events
    );
    let events = lines.events;
    drop((run, lines));
    let (started, cpu) = (Instant::now(), cpu_s());
    fle_chaos::report::render_run(&run_dir)?;
    let took = started.elapsed().as_secs_f64();
    let html = std::fs::metadata(run_dir.join("report.html"))?.len();
    println!(
        "{} render_run: {took:.2} s, {:.2} s CPU ({:.2} M events/s, report.html {:.1} MB); \
         goal < 5 s: {}",
        chrono::Utc::now().format("%Y-%m-%d"),
        cpu_s() - cpu,
        events as f64 / took / 1e6,
        html as f64 / 1e6,
        if took < 5.0 { "met" } else { "MISSED" }
    );
    Ok(())
}

//! Renders the report of a synthetic 1-hour, 9-node run (50 Hz observers, writes, a fault
//! every minute: about 1.6 M events) and prints how long it took. Goal: under 5 s.
//!
//! `cargo bench --bench report` (FLC_BENCH_HOURS=0.1 for a quick look).

// Test support shared with the report tests: the synthetic history writer.
#[allow(dead_code)]
#[path = "../tests/report_support/fixture.rs"]
mod fixture;

use fixture::{write_run, FixtureSpec};
use std::time::Instant;

fn main() -> anyhow::Result<()> {
    let hours: f64 = std::env::var("FLC_BENCH_HOURS")
        .ok()
        .and_then(|h| h.parse().ok())
        .unwrap_or(1.0);
    let root = tempfile::tempdir()?;
    let spec = FixtureSpec {
        duration_s: 3600.0 * hours,
        ..FixtureSpec::hour_nine_nodes("bench")
    };
    let started = Instant::now();
    let fx = write_run(root.path(), &spec)?;
    let bytes = std::fs::metadata(fx.run_dir.join("history.jsonl"))?.len();
    println!(
        "history: {} events, {:.0} MB, {} nodes, {:.0} s of run, {} faults (generated in {:.1} s)",
        fx.events,
        bytes as f64 / 1e6,
        spec.nodes,
        spec.duration_s,
        fx.faults,
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let nodes: Vec<String> = (1..=spec.nodes as u64)
        .map(fle_chaos::history::node_name)
        .collect();
    let data = fle_chaos::report::scan::scan(&fx.run_dir.join("history.jsonl"), &nodes, 0)?;
    println!(
        "  of which the history scan alone: {:.2} s ({} events)",
        started.elapsed().as_secs_f64(),
        data.events
    );
    drop(data);
    let started = Instant::now();
    fle_chaos::report::render_run(&fx.run_dir)?;
    let took = started.elapsed().as_secs_f64();
    let html = std::fs::metadata(fx.run_dir.join("report.html"))?.len();
    println!(
        "render_run: {took:.2} s ({:.2} M events/s, report.html {:.1} MB); goal < 5 s: {}",
        fx.events as f64 / took / 1e6,
        html as f64 / 1e6,
        if took < 5.0 { "met" } else { "MISSED" }
    );
    Ok(())
}

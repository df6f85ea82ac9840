//! `fle-chaos check RUN_DIR [--recovery-bound-ms N] [--read-slack-ms N] [--stepdown-slack-ms N]
//! [--linearizable-budget STATES]`:
//! re-runs the checkers on a stored run, rewrites its results.json, prints one line per checker
//! and returns the verdict's exit code (like Jepsen's analyze). `check --list` prints the
//! checkers (`registry::list`).

use super::{check_stored, CheckOptions, Results};
use crate::store::RunDir;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    /// The run folder (reports/<test>/<timestamp>), holding test.json and history.jsonl.
    #[arg(required_unless_present = "list")]
    pub run_dir: Option<PathBuf>,
    /// List the checkers instead (name, what a run needs for it, what it judges; tab-separated).
    #[arg(long, conflicts_with = "run_dir")]
    pub list: bool,
    /// How long after the final heal a quorum may take to agree on a leader, in ms
    /// (default: (syncLimit + initLimit) * tickTime + 2000, from test.json).
    #[arg(long, value_name = "N")]
    pub recovery_bound_ms: Option<u64>,
    /// How much older than its recorded time a status read's snapshot may be, in ms; orderings
    /// closer than this are not trusted (default: the run's observer read timeout,
    /// test.json settings.status_timeout_ms, else 50). A value given is used as given.
    #[arg(long, value_name = "N")]
    pub read_slack_ms: Option<u64>,
    /// How much longer than syncLimit*tickTime a leader without a quorum may still be seen
    /// LEADING before leader-stepdown calls it invalid, in ms (default: tickTime + read slack
    /// + 500).
    #[arg(long, value_name = "N")]
    pub stepdown_slack_ms: Option<u64>,
    /// How many states linearizable's search may keep per key before that key is unknown
    /// (default 1000000: about 32 MiB).
    #[arg(long, value_name = "STATES")]
    pub linearizable_budget: Option<u64>,
}

pub async fn check(args: CheckArgs) -> anyhow::Result<i32> {
    let Some(dir) = &args.run_dir else {
        print!("{}", super::registry::list());
        return Ok(crate::exit::VALID);
    };
    let opts = CheckOptions {
        recovery_bound_ms: args.recovery_bound_ms,
        read_slack_ms: args.read_slack_ms,
        stepdown_slack_ms: args.stepdown_slack_ms,
        linearizable_states: args.linearizable_budget,
    };
    let run_dir = RunDir::open(dir)?;
    let stored = run_dir.clone();
    // Parsing millions of lines is CPU work: keep it off the async runtime's threads.
    let results = tokio::task::spawn_blocking(move || check_stored(&stored, &opts)).await??;
    print!("{}", summary(&results));
    println!("results: {}", run_dir.results_path().display());
    Ok(results.valid.exit_code())
}

/// One line per checker, then the combined verdict.
pub fn summary(results: &Results) -> String {
    let mut out = String::new();
    for c in &results.checkers {
        let first = c.explanation.split(". ").next().unwrap_or("");
        let first = first.trim_end_matches('.');
        out.push_str(&format!("{:<19} {:<7} {first}.\n", c.name, c.shown()));
    }
    if let Some(c) = &results.coverage {
        out.push_str(&format!("coverage: {}\n", c.line()));
    }
    for k in &results.known {
        out.push_str(&format!("known: {k}\n"));
    }
    for r in &results.resembles {
        out.push_str(&format!("resembles: {r}\n"));
    }
    out.push_str(&format!("verdict: {}\n", results.verdict_words()));
    out
}

//! `fle-chaos`: the controller. Each subcommand lives with the module that does the work;
//! this file only parses the command line and turns results into Jepsen's exit codes.

use clap::{Parser, Subcommand};
use fle_chaos::commands::{prune, run, shrink, sweep};
use fle_chaos::history::FaultKind;
use fle_chaos::{checker, control, exit, report};

/// What `fle-chaos --help` says first: what the tool does, naming every fault kind, and the
/// exit codes.
fn long_about() -> String {
    let kinds: Vec<&str> = FaultKind::ALL.iter().map(|k| k.name()).collect();
    format!(
        "Starts a real cluster, injects faults ({}), records a history, checks it and writes a \
         report.\n\n\
         Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad input (nothing was started), 255 the \
         tool failed (or could not go on: a history it cannot write, a node that died while the \
         cluster started), 130 interrupted by SIGINT, 143 by SIGTERM, 129 by SIGHUP (the \
         cluster is torn down and the history says so).",
        kinds.join(", ")
    )
}

#[derive(Parser)]
#[command(
    name = "fle-chaos",
    version,
    about = "Jepsen-style chaos testing for ZooKeeper's Fast Leader Election",
    long_about = long_about()
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once; the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Run a test: start a cluster, run the workload and faults, check, report.
    Test(run::TestArgs),
    /// Remove what crashed runs left behind (processes, namespaces, links, iptables chains).
    Clean(control::backend::clean::CleanArgs),
    /// Re-run the checkers on a stored run and rewrite its results.json.
    Check(checker::cli::CheckArgs),
    /// Re-render a stored run's report.
    Report(report::cli::ReportArgs),
    /// Serve the reports folder over HTTP for browsing.
    Serve(report::cli::ServeArgs),
    /// Run a matrix of tests (nightly): several at once, within a budget, one summary.
    Sweep(sweep::SweepArgs),
    /// Combine the folders of a sharded sweep into one summary, JUnit file and trends.
    Merge(sweep::MergeArgs),
    /// Shrink a failing run to the smallest fault sequence that still fails (delta debugging
    /// over replays of its recorded faults); exit 1 when it reproduces, 2 when it does not.
    Shrink(shrink::ShrinkArgs),
    /// Simulate many seeded runs of an fle-node cluster in virtual time (the node's own
    /// election and Zab code), judged by the same checkers; failing runs keep a folder and a
    /// schedule to replay on real processes.
    Simulate(fle_chaos::commands::sim::cli::SimulateArgs),
    /// Remove old run and sweep folders from a reports folder, keeping the newest of each and
    /// whatever `latest`, a merged sweep or the trends still point to.
    Prune(prune::PruneArgs),
}

/// A command-line error as one line naming the flag and the value (clap's own message is
/// several lines, with a usage block that may not name the flag at all).
fn one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    // The message is its first paragraph (a list of missing flags continues it on the next
    // lines); the usage block and tips after the blank line are left out.
    let message: Vec<&str> = text
        .lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty())
        .collect();
    let mut message = message.join(" ");
    // clap's tips ("a similar argument exists: '--nemesis-file'") are the fix: kept.
    for tip in text.lines().filter_map(|l| l.trim().strip_prefix("tip: ")) {
        message.push_str(&format!("; {tip}"));
    }
    // A missing flag is missing because of another one; clap's usage line names both.
    if e.kind() == clap::error::ErrorKind::MissingRequiredArgument {
        if let Some(usage) = text.lines().find_map(|l| l.trim().strip_prefix("Usage: ")) {
            message.push_str(&format!(" ({usage})"));
        }
    }
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    format!("{message}; see fle-chaos help")
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if !e.use_stderr() {
                // --help, --version.
                let _ = e.print();
                std::process::exit(exit::VALID);
            }
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                let _ = e.print();
            } else {
                eprintln!("fle-chaos: {}", one_line(&e));
            }
            std::process::exit(exit::BAD_ARGS);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fle-chaos: cannot start the async runtime: {e}");
            std::process::exit(exit::CRASHED);
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Test(args) => run::test(args).await,
            Command::Clean(args) => control::backend::clean::clean(args).await,
            Command::Check(args) => checker::cli::check(args).await,
            Command::Report(args) => report::cli::report(args).await,
            Command::Serve(args) => report::cli::serve(args).await,
            Command::Sweep(args) => sweep::sweep(args).await,
            Command::Merge(args) => sweep::merge(args).await,
            Command::Shrink(args) => shrink::shrink(args).await,
            Command::Prune(args) => prune::prune(args).await,
            Command::Simulate(args) => fle_chaos::commands::sim::cli::simulate(args).await,
        }
    });
    // Drop the runtime before exiting so that kill_on_drop children are reaped.
    drop(runtime);
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("fle-chaos: {e:#}");
            std::process::exit(exit::code_for(&e));
        }
    }
}

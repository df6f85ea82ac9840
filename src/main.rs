//! `fle-chaos`: the controller. Each subcommand lives with the module that does the work;
//! this file only parses the command line and turns results into Jepsen's exit codes.

use clap::{Parser, Subcommand};
use fle_chaos::{checker, control, exit, report, run};

#[derive(Parser)]
#[command(
    name = "fle-chaos",
    version,
    about = "Jepsen-style chaos testing for ZooKeeper's Fast Leader Election",
    long_about = "Starts a real cluster, injects faults (kill, pause, partition, clock skew), \
                  records a history, checks it and writes a report.\n\n\
                  Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments, 255 the tool failed."
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
    Clean(control::clean::CleanArgs),
    /// Re-run the checkers on a stored run and rewrite its results.json.
    Check(checker::cli::CheckArgs),
    /// Re-render a stored run's report.
    Report(report::cli::ReportArgs),
    /// Serve the reports folder over HTTP for browsing.
    Serve(report::cli::ServeArgs),
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::BAD_ARGS
            } else {
                exit::VALID
            };
            let _ = e.print();
            std::process::exit(code);
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
            Command::Clean(args) => control::clean::clean(args).await,
            Command::Check(args) => checker::cli::check(args).await,
            Command::Report(args) => report::cli::report(args).await,
            Command::Serve(args) => report::cli::serve(args).await,
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

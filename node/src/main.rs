//! `fle-node`: one ZooKeeper-style server (Fast Leader Election). See the `fle_node` library.
//!
//! Exit codes: 0 stopped by SIGTERM/SIGINT (or `--list-bugs` printed), 2 bad command line or
//! configuration (an unknown `--bug` included), 1 could not start (data dir, ports) or failed
//! while running.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use fle_node::bugs::{self, Bugs};
use fle_node::host_clock;
use fle_node::lazyfs;
use fle_node::{config, server};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

#[derive(Parser)]
#[command(
    name = "fle-node",
    version,
    about = "One ZooKeeper-style server that finds its leader with Fast Leader Election",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// zoo.cfg-style file (tickTime, initLimit, syncLimit, dataDir, server.N, admin.*);
    /// dataDir must hold a `myid` file.
    #[arg(long, value_name = "FILE", required_unless_present = "list_bugs")]
    config: Option<PathBuf>,
    /// TEST ONLY: run with seeded bugs (comma-separated names from --list-bugs) so checkers
    /// and nemeses can prove they catch them.
    #[arg(long, value_name = "BUG[,BUG...]")]
    bug: Vec<String>,
    /// Print the seeded bugs, one per line: NAME, JIRA, fault that exposes it, description
    /// (tab-separated), and exit.
    #[arg(long)]
    list_bugs: bool,
    /// How long a quorum must agree with no better vote before deciding (finalizeWait).
    #[arg(long, default_value_t = 200, value_name = "MS")]
    finalize_wait_ms: u64,
    /// Upper bound of the notification re-send back-off (maxNotificationInterval).
    #[arg(long, default_value_t = 60_000, value_name = "MS")]
    max_notification_interval_ms: u64,
}

#[derive(Subcommand)]
enum Command {
    /// Steps THIS MACHINE's system clock (clock_settime) so it runs MS milliseconds away from
    /// where it would be without fle-chaos, recording the offset in STATE; `--ms 0` takes the
    /// skew back. Used by `fle-chaos test --ssh --real-clock-skew` on throwaway VMs only.
    ClockOffset {
        /// The offset to put in force, in milliseconds (negative: behind).
        #[arg(long, value_name = "MS", allow_negative_numbers = true)]
        ms: i64,
        /// The file that records the offset in force (created when missing).
        #[arg(long, value_name = "STATE")]
        state: PathBuf,
    },
    /// The power-loss filesystem under a node's dataDir (used by `fle-chaos` power-loss faults).
    #[command(subcommand)]
    Lazyfs(LazyfsCommand),
}

#[derive(Subcommand)]
enum LazyfsCommand {
    /// Mounts BACKING at MOUNT, keeping un-fsynced writes in memory; serves until unmounted.
    Mount {
        #[arg(long, value_name = "DIR")]
        backing: PathBuf,
        #[arg(long, value_name = "DIR")]
        mount: PathBuf,
        /// The control socket (created once the mount is live): a path, or @NAME for a name in
        /// the abstract socket namespace (no file, no path-length limit).
        #[arg(long, value_name = "SOCKET")]
        control: lazyfs::ControlSocket,
        /// Go to the background once mounted (print the pid, exit 0); the filesystem logs to
        /// FILE. How fle-chaos starts it, locally and over SSH alike.
        #[arg(long, value_name = "FILE")]
        daemon_log: Option<PathBuf>,
    },
    /// Power loss: forgets every write not yet fsynced; prints what was lost as one JSON line.
    Drop {
        #[arg(long, value_name = "SOCKET")]
        control: lazyfs::ControlSocket,
        /// Also keep a seeded prefix of the last write (a torn write).
        #[arg(long, value_name = "SEED")]
        tear_seed: Option<u64>,
    },
    /// Ends the filesystem (unmounts it).
    Unmount {
        #[arg(long, value_name = "SOCKET")]
        control: lazyfs::ControlSocket,
    },
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    if let Some(Command::ClockOffset { ms, state }) = &cli.command {
        match host_clock::set_offset(state, *ms) {
            Ok(a) => println!(
                "offset_ms={ms} before_ms={} step_ms={}",
                a.before_ms, a.step_ms
            ),
            Err(e) => {
                eprintln!("fle-node clock-offset: {e:#}");
                std::process::exit(1);
            }
        }
        return;
    }
    if let Some(Command::Lazyfs(cmd)) = &cli.command {
        std::process::exit(lazyfs_command(cmd));
    }
    if cli.list_bugs {
        print!("{}", bugs::list());
        return;
    }
    // Checked before anything else: a typo must not start a server without the bug.
    let bugs = match Bugs::parse(&cli.bug.join(",")) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("fle-node: {e}");
            std::process::exit(2);
        }
    };
    let Some(config_path) = cli.config.as_ref() else {
        unreachable!("clap requires --config without a subcommand");
    };
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_target(false)
                .with_ansi(false),
        )
        .with(fle_node::log_filter::from_env("RUST_LOG"))
        .init();
    let cfg = match config::load(config_path) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("fle-node: {e}");
            std::process::exit(2);
        }
    };
    if cli.finalize_wait_ms == 0 || cli.max_notification_interval_ms < 200 {
        eprintln!(
            "fle-node: --finalize-wait-ms must be > 0 and --max-notification-interval-ms >= 200"
        );
        std::process::exit(2);
    }
    for key in &cfg.ignored_keys {
        tracing::warn!(key = %key, "zoo.cfg key not used by fle-node");
    }
    for info in bugs.iter() {
        tracing::warn!(
            "!!! SEEDED BUG ENABLED: --bug {} ({}): {}; this server is UNSAFE and exists only \
             to test checkers !!!",
            info.name,
            info.jira,
            info.description
        );
    }
    let opts = server::Options {
        finalize_wait: Duration::from_millis(cli.finalize_wait_ms),
        max_notification_interval: Duration::from_millis(cli.max_notification_interval_ms),
        bugs,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fle-node: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(server::run(cfg, opts)) {
        eprintln!("fle-node: {e:#}");
        std::process::exit(1);
    }
}

/// Runs a `fle-node lazyfs` subcommand; returns the exit code.
fn lazyfs_command(cmd: &LazyfsCommand) -> i32 {
    let r = match cmd {
        LazyfsCommand::Mount {
            backing,
            mount,
            control,
            daemon_log,
        } => match daemon_log {
            Some(log) => lazyfs::mount_daemon(backing, mount, control, log),
            None => lazyfs::mount(backing, mount, control),
        },
        LazyfsCommand::Drop { control, tear_seed } => {
            let req = match tear_seed {
                Some(s) => format!("drop {s}"),
                None => "drop".to_string(),
            };
            lazyfs::request(control, &req).map(|line| println!("{line}"))
        }
        LazyfsCommand::Unmount { control } => lazyfs::request(control, "unmount").map(|_| ()),
    };
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("fle-node lazyfs: {e:#}");
            1
        }
    }
}

//! One test run end to end (Jepsen's `core/run!`): setup, observe, workload, nemesis, final
//! heal, recovery, final reads, teardown, check, report.
//!
//! - `plan`: the CLI options and their validation (all bad input is found before anything
//!   is created);
//! - `run_dir`: the run folder, `latest`, controller.log;
//! - the history writer (`history::recorder`), the observers (`workload::observe`) and the
//!   nemesis seam (`nemesis::seam`) live below `run`, which only composes them;
//! - `final_phase`: heal safety net, recovery wait, final log reads;
//! - `guard`: teardown on every exit path; `progress`: the live line;
//! - `test`: the test as a value (control, target, workload, nemesis, checks), built from
//!   the plan; `run_body` runs it;
//! - `finish`: check and report (`finish_run`).

pub mod final_phase;
pub mod finish;
pub mod guard;
pub mod plan;
pub mod progress;
pub mod run_dir;
pub mod test;

pub use plan::TestArgs;

use crate::control::local::NetMode;
use crate::control::os_setup::{self, Needs};
use crate::control::registry::Registry;
use crate::control::ssh;
use crate::exit;
use crate::history::recorder::Recorder;
use crate::history::test_info::{Settings, TestInfo};
use crate::workload::observe::{self, Observations};
use crate::workload::{self, writes};
use anyhow::{Context, Result};
use guard::Guard;
use plan::Plan;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};
use test::Test;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// How long an observer waits for one status read. A read may carry a state this old, so the
/// checkers widen their cross-node ordering margin to it (test.json `status_timeout_ms`).
pub const STATUS_TIMEOUT: Duration = Duration::from_millis(500);

/// Says loudly, before anything happens, that `--real-clock-skew` will step real clocks.
fn warn_real_clock(hosts: &[String], kinds: &[String]) {
    eprintln!(
        "fle-chaos: WARNING: --real-clock-skew: clock faults will STEP THE SYSTEM CLOCKS of {} \
         (clock_settime), for every program on those hosts. Use it on throwaway VMs only. \
         The clocks are stepped back at the end of the run, or by `fle-chaos clean`.",
        hosts.join(", ")
    );
    if !kinds.iter().any(|k| k == "clock") {
        eprintln!("fle-chaos: note: --real-clock-skew, but no clock faults are scheduled");
    }
}

/// `fle-chaos test`: validates everything, sets up the OS, then runs the test `--test-count`
/// times; the exit code is the worst verdict.
pub async fn test(args: TestArgs) -> Result<i32> {
    let plan = Plan::from_args(args)?;
    let needs = Needs {
        netns: plan.mode == NetMode::Netns,
        iptables: plan.nemesis_settings.kinds.iter().any(|k| k == "partition"),
        faketime: plan.faketime,
    };
    match &plan.hosts {
        // Remote nodes: the tools are needed on the hosts (installed at setup), and every
        // host is checked now, before anything is created anywhere.
        Some(hosts) => {
            if plan.args.ssh.real_clock_skew {
                warn_real_clock(hosts, &plan.nemesis_settings.kinds);
            }
            ssh::check_hosts(
                hosts,
                &plan.args.ssh.options(),
                plan.args.ssh.real_clock_skew,
            )?
        }
        None => os_setup::ensure(needs, &mut |msg| eprintln!("fle-chaos: {msg}"))?,
    }
    if plan.args.target == plan::TargetKind::Zookeeper {
        let java = crate::control::zookeeper::launch::JvmOptions::default().java;
        crate::control::zookeeper::os_setup::ensure(&java, &mut |m| eprintln!("fle-chaos: {m}"))?;
    }
    std::fs::create_dir_all(&plan.args.out)
        .with_context(|| format!("cannot create --out {}", plan.args.out.display()))?;
    run_dir::init_tracing();
    let mut worst = exit::VALID;
    for i in 0..plan.args.test_count {
        let seed = plan.seed.wrapping_add(i as u64);
        // A panic inside the run unwinds through its guard (teardown) and ends here as 255.
        let code = match tokio::spawn(run_once(plan.clone(), seed)).await {
            Ok(Ok(code)) => code,
            Ok(Err(e)) => {
                run_dir::log_off();
                return Err(e);
            }
            Err(e) => {
                run_dir::log_off();
                anyhow::bail!("the run crashed: {e}");
            }
        };
        worst = worse(worst, code);
        if code == INTERRUPTED {
            return Ok(exit::UNKNOWN);
        }
    }
    Ok(worst)
}

/// Internal code for a run ended by a signal (reported as unknown).
const INTERRUPTED: i32 = -1;

fn worse(a: i32, b: i32) -> i32 {
    let rank = |c: i32| match c {
        exit::VALID => 0,
        exit::UNKNOWN | INTERRUPTED => 1,
        exit::INVALID => 2,
        _ => 3,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

/// One run: returns the verdict's exit code, or INTERRUPTED.
async fn run_once(plan: Plan, seed: u64) -> Result<i32> {
    let start = Instant::now();
    let run_dir = run_dir::create(&plan.args.out, &plan.name)?;
    run_dir::log_to(&run_dir)?;
    eprintln!("fle-chaos: run {} (seed {seed})", run_dir.display());
    let run_id = format!("{:06x}", rand::random::<u32>() & 0xff_ffff);
    TestInfo {
        name: plan.name.clone(),
        target: match plan.args.target {
            plan::TargetKind::Fle => "fle".into(),
            plan::TargetKind::Zookeeper => "zookeeper".into(),
        },
        nodes: plan.nodes.clone(),
        workload: plan.workload.name.clone(),
        nemesis: plan.nemesis_settings.kinds.clone(),
        seed,
        time_limit_s: plan.time_limit.as_secs_f64(),
        tick_ms: plan.args.tick_ms,
        init_limit: plan.args.init_limit,
        sync_limit: plan.args.sync_limit,
        started_at: chrono::Utc::now(),
        replay_command: plan.replay_command(seed),
        version: env!("CARGO_PKG_VERSION").into(),
        history_format: crate::history::FORMAT_VERSION,
        settings: Settings {
            status_timeout_ms: Some(STATUS_TIMEOUT.as_millis() as u64),
            recovery_timeout_s: Some(plan.recovery_timeout.as_secs_f64()),
            workload: serde_json::from_value(serde_json::to_value(&plan.workload)?)?,
            rest: serde_json::from_value(serde_json::json!({
                "args": plan.args,
                "nemesis": plan.nemesis_settings,
                "net": plan.args.net,
                "node_binary": plan.binary,
                "faketime": plan.faketime,
                "fake_monotonic": plan.fake_monotonic,
                "real_clock_skew": plan.args.ssh.real_clock_skew,
                "run_id": run_id,
            }))?,
        },
    }
    .write(&run_dir.join("test.json"))?;
    let recorder = Arc::new(Recorder::create_for(
        &run_dir.join("history.jsonl"),
        start,
        &plan.nodes,
    )?);
    let registry = Arc::new(Registry::create(&run_id, &run_dir)?);
    let guard = Guard::new(registry.clone());
    let outcome = tokio::select! {
        r = run_body(&plan, seed, &run_dir, recorder.clone(), registry, &guard) => r.map(|_| None),
        sig = shutdown_signal() => Ok(Some(sig)),
    };
    match outcome {
        Err(e) => {
            tracing::error!("run failed: {e:#}");
            guard.teardown_now();
            run_dir::log_off();
            Err(e)
        }
        Ok(Some(signal)) => {
            tracing::warn!("interrupted by {signal}");
            guard.teardown_now();
            eprintln!(
                "fle-chaos: interrupted by {signal}; cluster torn down; partial history in {}",
                run_dir.join("history.jsonl").display()
            );
            run_dir::log_off();
            Ok(INTERRUPTED)
        }
        Ok(None) => {
            if plan.args.leave_running {
                guard.disarm();
                eprintln!(
                    "fle-chaos: cluster left running (--leave-running); see {}; remove it with `fle-chaos clean`",
                    run_dir.join("resources.jsonl").display()
                );
            } else {
                guard.teardown_now();
            }
            if recorder.write_errors() > 0 {
                eprintln!(
                    "fle-chaos: {} history events could not be written",
                    recorder.write_errors()
                );
            }
            let code = tokio::task::spawn_blocking({
                let dir = run_dir.clone();
                move || finish::finish_run(&dir)
            })
            .await??;
            tracing::info!("verdict exit code {code}");
            run_dir::log_off();
            eprintln!(
                "fle-chaos: {} ({}): exit {code}",
                run_dir.display(),
                match code {
                    exit::VALID => "valid",
                    exit::INVALID => "INVALID",
                    _ => "unknown",
                }
            );
            Ok(code)
        }
    }
}

/// The run proper, from cluster creation to the final reads. Dropping this future (on a
/// signal) aborts every task it started; the caller's guard then tears the cluster down.
async fn run_body(
    plan: &Plan,
    seed: u64,
    run_dir: &Path,
    recorder: Arc<Recorder>,
    registry: Arc<Registry>,
    guard: &Guard,
) -> Result<()> {
    let progress = progress::bar();
    progress.set_message("creating the cluster");
    let test = Test::build(plan, seed, run_dir, registry, guard)?;
    let target = test.target.clone();
    for node in &plan.nodes {
        target.setup(node)?;
    }
    for node in &plan.nodes {
        let pid = target.start(node)?;
        tracing::info!("started {node}: pid {pid}");
    }

    let obs = Arc::new(Observations::new(plan.nodes.clone()));
    let (stop_observers, observers_stopped) = watch::channel(false);
    let mut observers = JoinSet::new();
    let period = Duration::from_secs_f64(1.0 / test.workload.observe_hz);
    for node in &plan.nodes {
        observers.spawn(observe::observe(
            node.clone(),
            target.clone(),
            recorder.clone(),
            obs.clone(),
            period,
            observers_stopped.clone(),
        ));
    }
    let mut progress_task = JoinSet::new();
    progress_task.spawn(progress::refresh(
        progress.clone(),
        recorder.clone(),
        obs.clone(),
        test.time_limit,
    ));

    let (stop_ops, ops_stopped) = watch::channel(false);
    let ctx = test.nemesis_context(recorder.clone(), obs.clone(), ops_stopped.clone());
    let mut ops = JoinSet::new();
    {
        let (nemesis, ctx) = (test.nemesis.clone(), ctx.clone());
        ops.spawn(async move {
            if let Err(e) = nemesis.run(&ctx).await {
                tracing::error!("nemesis failed: {e:#}");
            }
        });
    }
    if test.workload.kind == workload::Kind::Writes {
        let clients = writes::Clients {
            target: target.clone(),
            recorder: recorder.clone(),
            observations: obs.clone(),
            concurrency: test.workload.clients,
            rate: test.workload.rate,
            next_value: Arc::new(AtomicU64::new(0)),
        };
        for id in 0..test.workload.clients {
            ops.spawn(writes::client(id, clients.clone(), ops_stopped.clone()));
        }
    }

    tokio::time::sleep(test.time_limit).await;
    let _ = stop_ops.send(true);
    while let Some(r) = ops.join_next().await {
        r.context("a client or the nemesis crashed")?;
    }
    progress_task.abort_all();
    progress.set_message("final heal and recovery");

    if let Err(e) = test.nemesis.final_heal(&ctx).await {
        tracing::error!("final heal failed: {e:#}");
    }
    final_phase::ensure_all_up(target.as_ref(), &recorder);
    match final_phase::wait_for_recovery(&recorder, test.checks.recovery_timeout).await {
        Some((sid, epoch, took)) => tracing::info!(
            "recovered: n{sid} leads epoch {epoch}, {} ms after the final heal",
            took.as_millis()
        ),
        None => tracing::warn!(
            "no quorum agreed on a leader within {} s of the final heal",
            test.checks.recovery_timeout.as_secs_f64()
        ),
    }
    let _ = stop_observers.send(true);
    while let Some(r) = observers.join_next().await {
        r.context("an observer crashed")?;
    }
    progress.set_message("final reads");
    final_phase::final_reads(target.clone(), recorder.clone()).await;
    progress.finish_and_clear();
    Ok(())
}

/// Resolves on Ctrl-C, SIGTERM or SIGHUP, naming the signal.
async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        let _ = tokio::signal::ctrl_c().await;
        return "SIGINT";
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "SIGINT",
        _ = term.recv() => "SIGTERM",
        _ = hup.recv() => "SIGHUP",
    }
}

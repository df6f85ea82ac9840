//! One test run end to end (Jepsen's `core/run!`): setup, observe, workload, nemesis, final
//! heal, recovery, final reads, teardown, check, report.
//!
//! - `plan`: the CLI options and their validation (all bad input is found before anything
//!   is created); `preflight`: the schedule fits the run and names its nodes, the node binary
//!   knows the `--bug`;
//! - `run_dir`: the run folder, `latest`, controller.log;
//! - the history writer (`history::recorder`), the observers (`workload::observe`) and the
//!   nemesis seam (`nemesis::seam`) live below `run`, which only composes them;
//! - `final_phase`: heal safety net, recovery wait, final log reads;
//! - `guard`: teardown on every exit path; `progress`: the live line;
//! - `test`: the test as a value (control, target, workload, nemesis, checks), built from
//!   the plan; `run_body` runs it;
//! - `interrupt`: SIGINT/SIGTERM/SIGHUP; `node_watch`: nodes that die unasked (`node-exit`
//!   events; at start-up, an abort);
//! - `replay`: the run's faults as `schedule.toml`, and `--replay RUN_DIR`;
//! - `release_gate`: with `--zookeeper-version`, no fault before every server reported it;
//! - `finish`: check and report (`finish_run`).

pub mod child;
pub mod final_phase;
pub mod finish;
pub mod guard;
pub mod interrupt;
pub mod node_watch;
pub mod plan;
pub mod preflight;
pub mod progress;
pub mod release_gate;
pub mod replay;
pub mod run_dir;
pub mod test;

pub use plan::TestArgs;

use crate::control::backend::os_setup;
use crate::control::backend::registry::Registry;
use crate::control::backend::ssh;
use crate::control::sut::Target;
use crate::exit;
use crate::history::recorder::Recorder;
use crate::history::test_info::{MadeBy, RunSpec, TestInfo, TestSettings};
use crate::history::{EventType, FaultKind, InterruptedValue, CONTROLLER, F};
use crate::nemesis::NemesisContext;
use crate::store::RunDir;
use crate::workload::observe::{self, Observations};
use crate::workload::{self, register, writes};
use anyhow::{Context, Result};
use guard::Guard;
use interrupt::{Interrupts, Signal};
use plan::Plan;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};
use test::Test;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// How long an observer waits for one status read. A read may carry a state this old, so the
/// checkers widen their cross-node ordering margin to it (test.json `status_timeout_ms`).
pub const STATUS_TIMEOUT: Duration = Duration::from_millis(500);

/// How long the final phase waits for every node to rejoin: `--recovery-timeout`, plus the
/// notification back-off a correct server may still be waiting out after the heal (ZooKeeper's
/// `maxNotificationInterval`; none on fle-node), so a slow but bounded rejoin is measured and
/// judged against its bound rather than cut off before it.
pub fn settle_wait(plan: &Plan) -> Duration {
    let backoff = crate::checker::availability::notification_backoff_ms(
        plan.args.target.name(),
        &plan.zookeeper_settings(),
    );
    plan.recovery_timeout + Duration::from_millis(backoff)
}

/// A run's status timeout: `STATUS_TIMEOUT`, or for ZooKeeper one tick when that is longer. A
/// JVM on a slow host (run with long ticks for that reason: qemu's TCG) answers its
/// AdminServer within its own tick but often not within 500 ms; ZooKeeper itself gives a peer
/// syncLimit ticks.
pub fn status_timeout(plan: &Plan) -> Duration {
    match plan.args.target {
        plan::TargetKind::Zookeeper => STATUS_TIMEOUT.max(Duration::from_millis(plan.args.tick_ms)),
        plan::TargetKind::Fle => STATUS_TIMEOUT,
    }
}

/// Says loudly, before anything happens, that `--real-clock-skew` will step real clocks.
fn warn_real_clock(hosts: &[String], kinds: &[FaultKind]) {
    eprintln!(
        "fle-chaos: WARNING: --real-clock-skew: clock faults will STEP THE SYSTEM CLOCKS of {} \
         (clock_settime), for every program on those hosts. Use it on throwaway VMs only. \
         The clocks are stepped back at the end of the run, or by `fle-chaos clean`.",
        hosts.join(", ")
    );
    if !kinds.contains(&FaultKind::Clock) {
        eprintln!("fle-chaos: note: --real-clock-skew, but no clock faults are scheduled");
    }
}

/// `fle-chaos test`: validates everything, sets up the OS, then runs the test `--test-count`
/// times; the exit code is the worst verdict, or the signal's code when one interrupted it.
pub async fn test(args: TestArgs) -> Result<i32> {
    // What the run's commands leave running (lazyfs) is reaped by this process, not PID 1.
    crate::control::backend::reaper::adopt_orphans();
    if args.zookeeper_version.as_deref() == Some("list") {
        return list_zookeeper_releases();
    }
    let mut plan = Plan::from_args(replay::resolve(args)?)?;
    let interrupts = Interrupts::install()?;
    match plan.hosts.clone() {
        // Remote nodes: the tools are needed on the hosts (installed at setup), and every
        // host is checked now, before anything is created anywhere.
        Some(hosts) => {
            if plan.args.ssh.real_clock_skew {
                warn_real_clock(&hosts, &plan.nemesis_settings.kinds);
            }
            // The default schedule leaves power loss out where a host has no FUSE (recorded
            // in test.json); an explicit one is refused by the preflight.
            let strict = plan.power_loss() && !plan.default_schedule();
            let facts = ssh::check_hosts(
                &hosts,
                &plan.args.ssh.options(),
                plan.args.ssh.real_clock_skew,
                strict,
            )?;
            let no_fuse: Vec<&str> = hosts
                .iter()
                .zip(&facts)
                .filter(|(_, f)| !f.has_fuse)
                .map(|(h, _)| h.as_str())
                .collect();
            if plan.power_loss() && !no_fuse.is_empty() {
                plan.leave_out_power_loss(format!(
                    "no /dev/fuse on {} (lazyfs needs FUSE)",
                    no_fuse.join(", ")
                ));
            }
        }
        None => os_setup::ensure(plan.needs(), &mut |msg| eprintln!("fle-chaos: {msg}"))?,
    }
    for why in &plan.nemesis_settings.left_out {
        eprintln!("fle-chaos: the default schedule leaves out {why} (recorded in test.json)");
    }
    // Debian's package on this machine; remote hosts get theirs at setup, a home is checked.
    if plan.args.target == plan::TargetKind::Zookeeper
        && plan.hosts.is_none()
        && plan.zookeeper_home.is_none()
    {
        let java = crate::control::sut::zookeeper::launch::JvmOptions::default().java;
        crate::control::sut::zookeeper::os_setup::ensure(&java, &mut |m| {
            eprintln!("fle-chaos: {m}")
        })?;
    }
    std::fs::create_dir_all(&plan.args.out)
        .with_context(|| format!("cannot create --out {}", plan.args.out.display()))?;
    run_dir::init_tracing();
    let mut worst = exit::VALID;
    for i in 0..plan.args.test_count {
        // A signal between runs: no new run starts.
        if let Some(sig) = interrupts.received() {
            eprintln!("fle-chaos: interrupted by {}", sig.name());
            return Ok(sig.exit_code());
        }
        let seed = plan.seed.wrapping_add(i as u64);
        // A panic inside the run unwinds through its guard (teardown) and ends here as 255.
        let code = match tokio::spawn(run_once(plan.clone(), seed, interrupts.clone())).await {
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
        // The remaining runs do not start: the signal's code is the answer.
        if exit::is_interrupted(code) {
            return Ok(code);
        }
        worst = exit::worse(worst, code);
    }
    Ok(worst)
}

/// `--zookeeper-version list`: the releases Debian's archive offers, one a line.
fn list_zookeeper_releases() -> Result<i32> {
    use crate::control::sut::zookeeper::release;
    let offered = release::offered(&mut |m| eprintln!("fle-chaos: {m}"))?;
    for o in offered {
        println!(
            "{}\t{} {} ({})",
            o.version,
            release::PACKAGE,
            o.debian,
            o.suite
        );
    }
    Ok(exit::VALID)
}

/// How a run's body ended.
enum Ending {
    /// The final reads are done: check and report.
    Done,
    Interrupted(Signal),
    /// The history could not be written: nothing more can be proven.
    HistoryFailed(String),
    /// The run cannot go on (a node died while the cluster started).
    Aborted(String),
}

/// One run: returns the verdict's exit code, or the code of the signal that interrupted it.
/// It is the run's timeline read top to bottom (folder and test.json, setup, observers,
/// workload and nemesis, final phase, teardown, finish), each stage a call.
async fn run_once(plan: Plan, seed: u64, interrupts: Interrupts) -> Result<i32> {
    let start = Instant::now();
    let run_dir = RunDir::create(&plan.args.out, &plan.name)?;
    run_dir::log_to(&run_dir)?;
    eprintln!("fle-chaos: run {run_dir} (seed {seed})");
    let run_id = format!("{:06x}", rand::random::<u32>() & 0xff_ffff);
    write_test_info(&plan, seed, &run_dir, &run_id)?;
    let recorder = Arc::new(Recorder::create_for(
        &run_dir.new_history(),
        start,
        &plan.nodes,
        &plan.observers,
    )?);
    let flusher = spawn_flusher(recorder.clone());
    let registry = Arc::new(Registry::create(&run_id, run_dir.path())?);
    let guard = Guard::new(registry.clone());
    let (abort, mut aborted) = watch::channel(None::<String>);
    let outcome = tokio::select! {
        r = run_body(&plan, seed, &run_dir, recorder.clone(), registry, &guard, abort) => {
            r.map(|_| Ending::Done)
        }
        // Only a reason aborts: the watch ends (its sender dropped) before teardown, too.
        why = async {
            let why = aborted.wait_for(|a| a.is_some()).await.map(|w| w.clone());
            match why {
                Ok(why) => why,
                Err(_) => std::future::pending().await,
            }
        } => {
            Ok(Ending::Aborted(why.unwrap_or_default()))
        }
        sig = interrupts.wait() => Ok(Ending::Interrupted(sig)),
        why = recorder.failed() => Ok(Ending::HistoryFailed(why)),
    };
    flusher.abort();
    recorder.flush();
    // Writes that failed after the body's last await (the final reads) end here too.
    let outcome = match outcome {
        Ok(Ending::Done) if recorder.write_errors() > 0 => {
            Ok(Ending::HistoryFailed(recorder.failed().await))
        }
        other => other,
    };
    end_run(&plan, &run_dir, &recorder, &guard, &interrupts, outcome).await
}

/// Writes the run's test.json: what was asked and how, before anything is created.
fn write_test_info(plan: &Plan, seed: u64, run_dir: &RunDir, run_id: &str) -> Result<()> {
    let made_by = MadeBy::Test(TestSettings {
        args: Some(serde_json::from_value(serde_json::to_value(&plan.args)?)?),
        nemesis: Some(serde_json::to_value(&plan.nemesis_settings)?),
        net: serde_json::to_value(plan.args.net)?
            .as_str()
            .map(str::to_string),
        node_binary: Some(plan.binary.clone()),
        faketime: Some(plan.faketime),
        fake_monotonic: plan.fake_monotonic,
        real_clock_skew: Some(plan.args.ssh.real_clock_skew),
        run_id: Some(run_id.into()),
    });
    run_dir.save_info(&TestInfo::new(RunSpec {
        name: plan.name.clone(),
        target: plan.args.target.name().into(),
        nodes: plan.nodes.clone(),
        observers: plan.observers.clone(),
        workload: plan.workload.name.clone(),
        workload_settings: serde_json::from_value(serde_json::to_value(&plan.workload)?)?,
        nemesis: plan.kind_names(),
        seed,
        time_limit: plan.time_limit,
        tick_ms: plan.args.tick_ms,
        init_limit: plan.args.init_limit,
        sync_limit: plan.args.sync_limit,
        started_at: chrono::Utc::now(),
        replay_command: replay::command(run_dir),
        status_timeout: status_timeout(plan),
        recovery_timeout: settle_wait(plan),
        faults_planned: plan.faults_planned(seed),
        zookeeper_config: plan.zookeeper_settings(),
        made_by,
    }))
}

/// Flushes the history every 250 ms while the run goes on (until aborted).
fn spawn_flusher(recorder: Arc<Recorder>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(250));
        loop {
            tick.tick().await;
            recorder.flush_if_due();
        }
    })
}

/// Ends a run by how its body ended: the cluster torn down, and the error, the signal's code,
/// or (the body done) the verdict's code.
async fn end_run(
    plan: &Plan,
    run_dir: &RunDir,
    recorder: &Recorder,
    guard: &Guard,
    interrupts: &Interrupts,
    outcome: Result<Ending>,
) -> Result<i32> {
    match outcome {
        Err(e) => {
            tracing::error!("run failed: {e:#}");
            guard.teardown_now();
            run_dir::log_off();
            Err(e)
        }
        Ok(Ending::HistoryFailed(why)) => {
            tracing::error!("run aborted: {why}");
            guard.teardown_now();
            run_dir::log_off();
            Err(anyhow::anyhow!(
                "{why}; run aborted and cluster torn down (free space under --out {}, or choose another --out)",
                plan.args.out.display()
            ))
        }
        Ok(Ending::Aborted(why)) => {
            tracing::error!("run aborted: {why}");
            guard.teardown_now();
            run_dir::log_off();
            Err(anyhow::anyhow!("{why}; run aborted and cluster torn down"))
        }
        Ok(Ending::Interrupted(signal)) => {
            interrupted(recorder, signal);
            guard.teardown_now();
            eprintln!(
                "fle-chaos: interrupted by {}; cluster torn down; partial history in {}",
                signal.name(),
                run_dir.history().display()
            );
            run_dir::log_off();
            Ok(signal.exit_code())
        }
        Ok(Ending::Done) => finish_done(plan, run_dir, recorder, guard, interrupts).await,
    }
}

/// The body is done: the cluster torn down (or left running, `--leave-running`), the run's
/// faults written for a replay, then check and report, unless a signal stops the check.
async fn finish_done(
    plan: &Plan,
    run_dir: &RunDir,
    recorder: &Recorder,
    guard: &Guard,
    interrupts: &Interrupts,
) -> Result<i32> {
    if plan.args.leave_running {
        guard.disarm();
        eprintln!(
            "fle-chaos: cluster left running (--leave-running); see {}; remove it with `fle-chaos clean`",
            run_dir.path().join("resources.jsonl").display()
        );
    } else {
        guard.teardown_now();
    }
    if let Err(e) = replay::write_schedule(run_dir) {
        eprintln!("fle-chaos: the run's faults could not be written for a replay: {e:#}");
    }
    let finish = tokio::task::spawn_blocking({
        let dir = run_dir.clone();
        move || finish::finish_run(&dir)
    });
    // A signal while checking: the history is complete, but the user asked to stop.
    let code = tokio::select! {
        r = finish => r??,
        signal = interrupts.wait() => {
            interrupted(recorder, signal);
            run_dir::log_off();
            eprintln!("fle-chaos: interrupted by {} while checking {run_dir}", signal.name());
            return Ok(signal.exit_code());
        }
    };
    tracing::info!("verdict exit code {code}");
    run_dir::log_off();
    eprintln!(
        "fle-chaos: {run_dir} ({}): exit {code}",
        match code {
            exit::VALID => "valid",
            exit::INVALID => "invalid",
            _ => "unknown",
        }
    );
    Ok(code)
}

/// Adds what the target says about the software it ran (e.g. ZooKeeper's reported versions)
/// to test.json as `settings.software`; a failure is logged, the run goes on.
fn record_software(run_dir: &RunDir, target: &dyn crate::control::sut::Target) {
    let Some(software) = target.software() else {
        return;
    };
    let done = run_dir.info().and_then(|mut info| {
        info.settings.software = Some(serde_json::from_value(software)?);
        run_dir.save_info(&info)
    });
    if let Err(e) = done {
        tracing::warn!("cannot record the target's software in test.json: {e:#}");
    }
}

/// Records the interruption (the history says why it ends there) and logs it.
fn interrupted(recorder: &Recorder, signal: Signal) {
    tracing::warn!("interrupted by {}", signal.name());
    recorder.record(
        CONTROLLER,
        EventType::Info,
        F::Interrupted,
        None,
        serde_json::to_value(InterruptedValue {
            signal: signal.name().into(),
        })
        .unwrap_or_default(),
    );
    recorder.flush();
}

/// The run proper, from cluster creation to the final reads. Dropping this future (on a
/// signal) aborts every task it started; the caller's guard then tears the cluster down.
async fn run_body(
    plan: &Plan,
    seed: u64,
    run_dir: &RunDir,
    recorder: Arc<Recorder>,
    registry: Arc<Registry>,
    guard: &Guard,
    abort: watch::Sender<Option<String>>,
) -> Result<()> {
    let progress = progress::bar();
    progress.set_message("creating the cluster");
    let mut test = Test::build(plan, seed, run_dir.path(), registry, guard)?;
    // Every start, kill and stop goes through the watch, so an exit it did not cause is seen.
    let watched = Arc::new(node_watch::Watched::new(test.target.clone()));
    test.target = watched.clone();
    let target = test.target.clone();
    for node in &plan.nodes {
        target.setup(node)?;
    }
    for node in &plan.nodes {
        let pid = target.start(node)?;
        tracing::info!("started {node}: pid {pid}");
    }
    // Stopped and awaited after the final reads (below), before teardown.
    let mut watcher = JoinSet::new();
    watcher.spawn(node_watch::watch_nodes(watched, recorder.clone(), abort));

    let obs = Arc::new(Observations::new(plan.nodes.clone()));
    let (stop_observers, observers_stopped) = watch::channel(false);
    let period = Duration::from_secs_f64(1.0 / test.workload.observe_hz);
    let mut observers = spawn_observers(plan, &target, &recorder, &obs, period, &observers_stopped);
    if let Some(version) = &plan.args.zookeeper_version {
        progress.set_message("waiting for every server to report its release");
        release_gate::every_server_reports(target.as_ref(), &plan.nodes, version).await?;
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
    let mut ops = spawn_ops(&test, &ctx, &recorder, &obs, &ops_stopped);
    tokio::time::sleep(test.time_limit).await;
    let _ = stop_ops.send(true);
    while let Some(r) = ops.join_next().await {
        r.context("a client or the nemesis crashed")?;
    }
    progress_task.abort_all();
    progress.set_message("final heal and recovery");

    heal_and_settle(&test, &ctx, &recorder).await;
    let _ = stop_observers.send(true);
    while let Some(r) = observers.join_next().await {
        r.context("an observer crashed")?;
    }
    progress.set_message("final reads");
    final_phase::final_reads(target.clone(), recorder.clone()).await;
    record_software(run_dir, target.as_ref());
    // Stopped and awaited before teardown: a look in flight (an SSH round trip, which an
    // abort cannot interrupt) would otherwise see teardown's kills as nodes dying unasked.
    watcher.abort_all();
    while watcher.join_next().await.is_some() {}
    progress.finish_and_clear();
    Ok(())
}

/// One observer per node, reading its status every `period` until `stopped`.
fn spawn_observers(
    plan: &Plan,
    target: &Arc<dyn Target>,
    recorder: &Arc<Recorder>,
    obs: &Arc<Observations>,
    period: Duration,
    stopped: &watch::Receiver<bool>,
) -> JoinSet<()> {
    let mut observers = JoinSet::new();
    for node in &plan.nodes {
        observers.spawn(observe::observe(
            node.clone(),
            target.clone(),
            recorder.clone(),
            obs.clone(),
            period,
            stopped.clone(),
        ));
    }
    observers
}

/// The operations of the run until `stopped`: the nemesis, and the workload's clients.
fn spawn_ops(
    test: &Test,
    ctx: &NemesisContext,
    recorder: &Arc<Recorder>,
    obs: &Arc<Observations>,
    stopped: &watch::Receiver<bool>,
) -> JoinSet<()> {
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
            target: test.target.clone(),
            recorder: recorder.clone(),
            observations: obs.clone(),
            concurrency: test.workload.clients,
            rate: test.workload.rate,
            next_value: Arc::new(AtomicU64::new(0)),
        };
        for id in 0..test.workload.clients {
            ops.spawn(writes::client(id, clients.clone(), stopped.clone()));
        }
    }
    if test.workload.kind == workload::Kind::Register {
        let clients = register::Clients {
            target: test.target.clone(),
            recorder: recorder.clone(),
            nodes: test.target.nodes(),
            concurrency: test.workload.clients,
            rate: test.workload.rate,
            keys: test.workload.keys,
            next_value: Arc::new(AtomicU64::new(0)),
            seed: test.seed,
        };
        for id in 0..test.workload.clients {
            ops.spawn(register::client(id, clients.clone(), stopped.clone()));
        }
    }
    ops
}

/// The final heal, every node up again, then the wait for a leader every node rejoined.
async fn heal_and_settle(test: &Test, ctx: &NemesisContext, recorder: &Recorder) {
    let target = &test.target;
    if let Err(e) = test.nemesis.final_heal(ctx).await {
        tracing::error!("final heal failed: {e:#}");
    }
    final_phase::ensure_all_up(target.as_ref(), recorder);
    match final_phase::wait_for_settle(recorder, target.as_ref(), test.checks.recovery_timeout)
        .await
    {
        final_phase::Settled::Yes { sid, epoch, took } => tracing::info!(
            "settled: n{sid} leads epoch {epoch} and every node rejoined it, {} ms after the final heal",
            took.as_millis()
        ),
        // The recovery checker finds it in the history and names the nodes.
        final_phase::Settled::No { stragglers } => tracing::warn!(
            "not settled within {} s of the final heal: {}",
            test.checks.recovery_timeout.as_secs_f64(),
            stragglers.join("; ")
        ),
    }
}

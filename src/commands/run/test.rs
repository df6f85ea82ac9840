//! A test as a value, as Jepsen's test map: where the nodes run (`control`), what runs on them
//! (`target`), what clients do (`workload`), which faults (`nemesis`) and what the final phase
//! and the checkers judge by. `Test::build` makes it from a validated `Plan` (creating the
//! cluster, every resource recorded first); the run then only reads it, so a different
//! composition (another target, another backend, no nemesis) is a different value, not
//! different control flow.

use super::guard::Guard;
use super::plan::{Plan, TargetKind};
use crate::control::backend::local::LocalCluster;
use crate::control::backend::registry::Registry;
use crate::control::sut::fle_node::{FleNode, FleNodeOptions};
use crate::control::sut::zookeeper::{ZooKeeper, ZooKeeperOptions};
use crate::control::sut::Target;
use crate::control::{backend::ssh, blocking, Control};
use crate::history::recorder::Recorder;
use crate::nemesis::{Nemesis, NemesisContext, NemesisSettings};
use crate::workload::observe::Observations;
use crate::workload::Workload;
use anyhow::Result;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// One test, composed.
pub struct Test {
    pub seed: u64,
    pub control: Arc<dyn Control>,
    pub target: Arc<dyn Target>,
    pub workload: Workload,
    pub nemesis: Arc<dyn Nemesis>,
    pub nemesis_settings: NemesisSettings,
    /// Seconds of workload and faults before the final phase.
    pub time_limit: Duration,
    pub checks: Checks,
}

/// What the final phase and the checkers judge by (test.json records both for `check`).
#[derive(Debug, Clone, Copy)]
pub struct Checks {
    /// How long after the final heal a quorum may take to agree on a leader.
    pub recovery_timeout: Duration,
    /// How long an observer waits for one status read: a read may carry a state this old.
    pub status_timeout: Duration,
}

impl Test {
    /// Creates the cluster `plan` asks for, hands it to `guard` (teardown from then on), and
    /// puts the target on it. Nothing is started yet.
    pub fn build(
        plan: &Plan,
        seed: u64,
        run_dir: &Path,
        registry: Arc<Registry>,
        guard: &Guard,
    ) -> Result<Test> {
        let checks = Checks {
            recovery_timeout: super::settle_wait(plan),
            status_timeout: super::status_timeout(plan),
        };
        let control = create_control(plan, run_dir, registry)?;
        guard.set_control(control.clone());
        let target = create_target(plan, control.clone(), checks.status_timeout)?;
        Ok(Test {
            seed,
            control,
            target,
            workload: plan.workload.clone(),
            nemesis: plan.nemesis.clone(),
            nemesis_settings: plan.nemesis_settings.clone(),
            time_limit: plan.time_limit,
            checks,
        })
    }

    /// What the nemesis gets: this test's target and control, the run's recorder and
    /// observations, and the stop signal.
    pub fn nemesis_context(
        &self,
        recorder: Arc<Recorder>,
        observations: Arc<Observations>,
        stop: watch::Receiver<bool>,
    ) -> NemesisContext {
        NemesisContext {
            target: self.target.clone(),
            control: self.control.clone(),
            recorder,
            observations,
            seed: self.seed,
            settings: self.nemesis_settings.clone(),
            time_limit: self.time_limit,
            stop,
        }
    }
}

/// Where the nodes run: the SSH hosts of `--ssh`, else this machine (namespaces or loopback).
fn create_control(
    plan: &Plan,
    run_dir: &Path,
    registry: Arc<Registry>,
) -> Result<Arc<dyn Control>> {
    // In place, not spawn_blocking: a signal must not be able to drop the run while a
    // background thread is still creating (and recording) resources the teardown already listed.
    Ok(match &plan.hosts {
        Some(hosts) => {
            let config = ssh::SshClusterConfig {
                hosts: hosts.clone(),
                options: plan.args.ssh.options(),
                binary: plan.binary.clone(),
                needs: plan.needs(),
                real_clock: plan.args.ssh.real_clock_skew,
            };
            Arc::new(blocking(|| {
                ssh::SshCluster::create(config, run_dir, registry, &mut |m| {
                    eprintln!("fle-chaos: {m}")
                })
            })?)
        }
        None => Arc::new(blocking(|| {
            LocalCluster::create(plan.mode, plan.nodes.clone(), run_dir, registry)
        })?),
    })
}

/// What runs on the nodes: fle-node, or Apache ZooKeeper.
fn create_target(
    plan: &Plan,
    control: Arc<dyn Control>,
    status_timeout: Duration,
) -> Result<Arc<dyn Target>> {
    let write_timeout = Duration::from_millis(plan.workload.timeout_ms);
    Ok(match plan.args.target {
        TargetKind::Zookeeper => {
            let mut opts = ZooKeeperOptions::new(
                plan.args.tick_ms,
                plan.args.init_limit,
                plan.args.sync_limit,
            );
            // Only on request: libfaketime stalls the JVM (docs/zookeeper.md, Faults).
            opts.faketime = plan.args.faketime;
            if let Some(home) = &plan.zookeeper_home {
                opts.install = crate::control::sut::zookeeper::install::Install::Home(home.clone());
            }
            opts.expected_version = plan.args.zookeeper_version.clone();
            opts.write_timeout = write_timeout;
            opts.status_timeout = status_timeout;
            opts.config = plan.args.zookeeper_config.clone();
            opts.lazyfs = plan.power_loss().then(|| plan.binary.clone());
            opts.observers = plan.observers.iter().cloned().collect();
            opts.reconfig = plan.reconfig();
            Arc::new(ZooKeeper::new(control, opts)?)
        }
        TargetKind::Fle => Arc::new(FleNode::new(
            control,
            FleNodeOptions {
                binary: plan.binary.clone(),
                tick_ms: plan.args.tick_ms,
                init_limit: plan.args.init_limit,
                sync_limit: plan.args.sync_limit,
                faketime: plan.faketime,
                fake_monotonic: plan.fake_monotonic,
                bug: plan.args.bug.clone(),
                finalize_wait_ms: plan.args.finalize_wait_ms,
                power_loss: plan.power_loss(),
                observers: plan.observers.iter().cloned().collect(),
                status_timeout,
                write_timeout,
            },
        )?),
    })
}

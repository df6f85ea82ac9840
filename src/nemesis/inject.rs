//! Doing and undoing one fault on a live cluster, and recording both in the history.
//!
//! Every action is an `invoke` then an `info` (done, saying exactly what: nodes, pids, rules,
//! offsets) or a `fail` (it could not be done), as the history conventions require. An applied
//! fault returns an `Active` that knows how to undo itself.

use super::clock::{self, ClockSetting};
use super::iptables;
use super::partition::{components, groups_grudge, grudge, Grudge};
use super::plan::PlannedFault;
use super::schedule::{ClockMode, FaultKind, PartitionShape};
use super::seam::NemesisContext;
use super::targets::resolve;
use crate::control::host_clock;
use crate::control::registry::Resource;
use crate::control::Control;
use crate::history::{EventType, F, NEMESIS};
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// A fault in force, with what is needed to undo it.
#[derive(Debug, Clone)]
pub enum Active {
    Killed {
        nodes: Vec<String>,
    },
    Paused {
        nodes: Vec<String>,
    },
    Partitioned {
        nodes: Vec<String>,
    },
    /// `strobe` = Some((delta_ms, period)) while the clock flips.
    Skewed {
        nodes: Vec<String>,
        strobe: Option<(i64, Duration)>,
    },
}

/// How stale an observation may be to count as "the leader now".
const LEADER_MAX_AGE_NS: u64 = 1_000_000_000;

/// Applies `fault`, recording it. Returns None when nothing was done (recorded as `fail`).
pub fn apply(ctx: &NemesisContext, fault: &PlannedFault) -> Option<Active> {
    let nodes = ctx.observations.nodes().to_vec();
    let leader = ctx
        .observations
        .leader(ctx.recorder.now(), LEADER_MAX_AGE_NS)
        .map(|(name, _)| name);
    let t = &fault.template;
    let resolved = resolve(&t.target, &nodes, leader.as_deref(), fault.pick);
    let mut base = json!({
        "nodes": resolved.nodes,
        "target": t.target.describe(),
        "duration_ms": fault.duration.as_millis() as u64,
    });
    if let Some(note) = &resolved.note {
        base["note"] = json!(note);
    }
    let f = match t.kind {
        FaultKind::Kill => F::Kill,
        FaultKind::Pause => F::Pause,
        FaultKind::Partition => F::Partition,
        FaultKind::Clock => F::Clock,
    };
    let result =
        match t.kind {
            FaultKind::Kill => signal_all(ctx, &resolved.nodes, f, &base, |n| ctx.target.kill(n))
                .map(|()| Active::Killed {
                    nodes: resolved.nodes.clone(),
                }),
            FaultKind::Pause => signal_all(ctx, &resolved.nodes, f, &base, |n| ctx.target.pause(n))
                .map(|()| Active::Paused {
                    nodes: resolved.nodes.clone(),
                }),
            FaultKind::Partition => {
                let shape = t.shape.unwrap_or(PartitionShape::RandomHalves);
                let targets = if shape == PartitionShape::IsolateLeader {
                    resolve(
                        &super::schedule::TargetSpec::Leader,
                        &nodes,
                        leader.as_deref(),
                        fault.pick,
                    )
                    .nodes
                } else {
                    resolved.nodes.clone()
                };
                partition(
                    ctx,
                    shape,
                    &nodes,
                    &targets,
                    t.groups.as_deref(),
                    fault.pick,
                    &base,
                )
            }
            FaultKind::Clock => skew(ctx, t.clock, fault, &resolved.nodes, &base),
        };
    match result {
        Ok(active) => Some(active),
        Err(e) => {
            let mut value = base.clone();
            value["error"] = json!(format!("{e:#}"));
            ctx.recorder
                .record(NEMESIS, EventType::Fail, f, None, value);
            None
        }
    }
}

/// Undoes a fault, recording it. Errors are recorded, never raised: the run goes on.
pub fn undo(ctx: &NemesisContext, active: &Active) {
    match active {
        Active::Killed { nodes } => {
            let _ = signal_all(ctx, nodes, F::Start, &json!({ "nodes": nodes }), |n| {
                ctx.target.start(n).map(Some)
            });
        }
        Active::Paused { nodes } => {
            let _ = signal_all(ctx, nodes, F::Resume, &json!({ "nodes": nodes }), |n| {
                ctx.target.resume(n)
            });
        }
        Active::Partitioned { nodes } => heal_partition(ctx, nodes, false),
        Active::Skewed { nodes, .. } => reset_clocks(ctx, nodes, false),
    }
}

/// Runs `op` on every node (kill, pause, start, resume) and records invoke + info with the pids.
fn signal_all(
    ctx: &NemesisContext,
    nodes: &[String],
    f: F,
    base: &Value,
    op: impl Fn(&str) -> Result<Option<u32>>,
) -> Result<()> {
    ctx.recorder
        .record(NEMESIS, EventType::Invoke, f, single(nodes), base.clone());
    let mut pids = BTreeMap::new();
    let mut errors = BTreeMap::new();
    for node in nodes {
        match op(node) {
            Ok(pid) => {
                pids.insert(node.clone(), json!(pid));
            }
            Err(e) => {
                errors.insert(node.clone(), format!("{e:#}"));
            }
        }
    }
    let mut value = base.clone();
    value["pids"] = json!(pids);
    if errors.is_empty() {
        ctx.recorder
            .record(NEMESIS, EventType::Info, f, single(nodes), value);
        Ok(())
    } else {
        value["errors"] = json!(errors);
        // Partly done is still done: record what happened; fail only if nothing happened.
        let kind = if pids.is_empty() {
            EventType::Fail
        } else {
            EventType::Info
        };
        ctx.recorder.record(NEMESIS, kind, f, single(nodes), value);
        if pids.is_empty() {
            Err(anyhow!("no node was affected"))
        } else {
            Ok(())
        }
    }
}

fn partition(
    ctx: &NemesisContext,
    shape: PartitionShape,
    nodes: &[String],
    targets: &[String],
    groups: Option<&[Vec<String>]>,
    pick: u64,
    base: &Value,
) -> Result<Active> {
    if !partitions_possible(ctx.control.as_ref()) {
        bail!(
            "partitions need nodes with their own network stack (--net netns, or hosts over SSH)"
        );
    }
    let g = match groups {
        Some(groups) => {
            if let Some(unknown) = groups.iter().flatten().find(|n| !nodes.contains(n)) {
                bail!("groups name {unknown}, which is not a node of this cluster");
            }
            groups_grudge(nodes, groups)
        }
        None => grudge(shape, nodes, targets, pick),
    };
    let mut value = base.clone();
    value["shape"] = json!(shape.name());
    value["nodes"] = json!(g.keys().collect::<Vec<_>>());
    value["drops"] = json!(g);
    value["components"] = json!(components(nodes, &g));
    ctx.recorder.record(
        NEMESIS,
        EventType::Invoke,
        F::Partition,
        None,
        value.clone(),
    );
    let rules = cut(ctx.control.as_ref(), &g)?;
    value["chain"] = json!(iptables::CHAIN);
    value["rules"] = json!(rules);
    ctx.recorder
        .record(NEMESIS, EventType::Info, F::Partition, None, value);
    Ok(Active::Partitioned {
        nodes: g.keys().cloned().collect(),
    })
}

/// Whether nodes have network stacks of their own, so iptables can cut one off.
pub fn partitions_possible(control: &dyn Control) -> bool {
    control.kind() != "loopback"
}

/// Installs the grudge's DROP rules, each chain recorded before it exists; returns the rules
/// per node as text.
pub fn cut(control: &dyn Control, g: &Grudge) -> Result<BTreeMap<String, Vec<String>>> {
    let mut rules = BTreeMap::new();
    for (node, sources) in g {
        let netns = control.netns().map(|n| n.names.netns(node));
        control.registry().record(Resource::Rule {
            netns: netns.clone(),
            table: "filter".into(),
            spec: iptables::hook_spec(),
        })?;
        control.registry().record(Resource::Chain {
            netns,
            table: "filter".into(),
            chain: iptables::CHAIN.into(),
        })?;
        let addrs = sources
            .iter()
            .map(|s| control.node_host(s))
            .collect::<Result<Vec<_>>>()?;
        for cmd in iptables::cut_commands(&addrs) {
            run_iptables(control, node, &cmd)?;
        }
        rules.insert(
            node.clone(),
            addrs.iter().map(|a| format!("-s {a} -j DROP")).collect(),
        );
    }
    Ok(rules)
}

/// Removes the tool's chain from `nodes`; returns the nodes where it could not be removed.
pub fn uncut(control: &dyn Control, nodes: &[String]) -> BTreeMap<String, String> {
    let mut errors = BTreeMap::new();
    for node in nodes {
        for cmd in iptables::heal_commands() {
            // Unhooking a chain that is not there fails harmlessly; verify below instead.
            let _ = run_iptables(control, node, &cmd);
        }
        match chain_present(control, node) {
            Ok(false) => {}
            Ok(true) => {
                errors.insert(
                    node.clone(),
                    "the chain is still there after healing".to_string(),
                );
            }
            Err(e) => {
                errors.insert(node.clone(), format!("{e:#}"));
            }
        }
    }
    errors
}

/// Removes the tool's chain from `nodes` and records the heal.
pub fn heal_partition(ctx: &NemesisContext, nodes: &[String], last: bool) {
    let value = json!({ "nodes": nodes, "chain": iptables::CHAIN });
    record_undo(ctx, F::Heal, None, value, last, || {
        uncut(ctx.control.as_ref(), nodes)
    });
}

/// Records an undo as `invoke`, then `info`, or `fail` naming the nodes `undo` could not put
/// right (its map of node -> error).
fn record_undo(
    ctx: &NemesisContext,
    f: F,
    node: Option<&str>,
    mut value: Value,
    last: bool,
    undo: impl FnOnce() -> BTreeMap<String, String>,
) {
    if last {
        value["final"] = json!(true);
    }
    ctx.recorder
        .record(NEMESIS, EventType::Invoke, f, node, value.clone());
    let errors = undo();
    let kind = if errors.is_empty() {
        EventType::Info
    } else {
        value["errors"] = json!(errors);
        EventType::Fail
    };
    ctx.recorder.record(NEMESIS, kind, f, node, value);
}

/// Whether the tool's chain exists in `node`'s context.
pub fn chain_present(control: &dyn Control, node: &str) -> Result<bool> {
    let out = control.exec(node, "iptables", &["-w", "-S"])?;
    if !out.status.success() {
        bail!(
            "iptables -S failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(iptables::mentions_chain(&String::from_utf8_lossy(
        &out.stdout,
    )))
}

fn run_iptables(control: &dyn Control, node: &str, args: &[String]) -> Result<()> {
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = control.exec(node, "iptables", &argv)?;
    if !out.status.success() {
        bail!(
            "iptables {} on {node}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn skew(
    ctx: &NemesisContext,
    mode: Option<ClockMode>,
    fault: &PlannedFault,
    nodes: &[String],
    base: &Value,
) -> Result<Active> {
    let mode = mode.unwrap_or(ClockMode::Bump {
        delta_ms: 60_000,
        random_sign: true,
    });
    let mut value = base.clone();
    let (setting, strobe) = match mode {
        ClockMode::Bump { delta_ms, .. } => {
            let delta = fault.clock_delta_ms.unwrap_or(delta_ms);
            value["mode"] = json!("bump");
            value["offset_ms"] = json!(delta);
            (ClockSetting::Offset(delta), None)
        }
        ClockMode::Strobe {
            delta_ms,
            period_ms,
        } => {
            value["mode"] = json!("strobe");
            value["offset_ms"] = json!(delta_ms);
            value["period_ms"] = json!(period_ms);
            (
                ClockSetting::Offset(delta_ms),
                Some((delta_ms, Duration::from_millis(period_ms))),
            )
        }
        ClockMode::Rate { factor } => {
            value["mode"] = json!("rate");
            value["factor"] = json!(factor);
            (ClockSetting::Rate(factor), None)
        }
    };
    value["mechanism"] = json!(clock_mechanism(ctx.control.as_ref()));
    ctx.recorder.record(
        NEMESIS,
        EventType::Invoke,
        F::Clock,
        single(nodes),
        value.clone(),
    );
    let mut done = BTreeMap::new();
    for node in nodes {
        done.insert(node.clone(), set_clock(ctx, node, setting)?);
    }
    value[if ctx.control.real_clock() {
        "steps_ms"
    } else {
        "files"
    }] = json!(done);
    ctx.recorder
        .record(NEMESIS, EventType::Info, F::Clock, single(nodes), value);
    Ok(Active::Skewed {
        nodes: nodes.to_vec(),
        strobe,
    })
}

/// How this cluster moves clocks: "clock_settime" (the host's, `--real-clock-skew`) or
/// "libfaketime" (the node process's).
pub fn clock_mechanism(control: &dyn Control) -> &'static str {
    if control.real_clock() {
        "clock_settime"
    } else {
        "libfaketime"
    }
}

/// Puts `setting` in force on `node`'s clock; returns what was done: the libfaketime control
/// file written, or the step of the host's clock in ms.
pub fn set_clock(ctx: &NemesisContext, node: &str, setting: ClockSetting) -> Result<Value> {
    if ctx.control.real_clock() {
        let ClockSetting::Offset(ms) = setting else {
            bail!(
                "{node}: a host's real clock can be stepped, not sped up (rate needs libfaketime)"
            );
        };
        return Ok(json!(ctx.control.set_real_clock(node, ms)?));
    }
    let file = ctx.target.clock_file(node).ok_or_else(|| {
        anyhow!("{node} does not run under libfaketime, so its clock cannot be moved")
    })?;
    let node_dir = ctx.control.node_dir(node)?;
    let relative = file
        .strip_prefix(&node_dir)
        .unwrap_or(Path::new("faketime"));
    let path = ctx
        .control
        .write_file(node, relative, setting.faketime_text().as_bytes())
        .with_context(|| format!("cannot write the clock file of {node}"))?;
    Ok(json!(path))
}

/// The offset in force on `node`'s clock, for the final verification: Ok(None) when it has no
/// skew, Ok(Some(what)) when it has.
pub fn clock_skew_left(ctx: &NemesisContext, node: &str) -> Result<Option<String>> {
    if ctx.control.real_clock() {
        // No record: the tool never moved this host's clock.
        let state = ctx.control.node_dir(node)?.join(host_clock::STATE);
        let script = format!("cat '{}' 2>/dev/null || true", state.display());
        let text = ctx.control.exec(node, "sh", &["-c", &script])?.stdout;
        let ms = host_clock::offset_ms(&String::from_utf8_lossy(&text))?;
        return Ok((ms != 0).then(|| format!("{ms} ms (host clock)")));
    }
    let Some(file) = ctx.target.clock_file(node) else {
        return Ok(None);
    };
    let node_dir = ctx.control.node_dir(node)?;
    let relative = file.strip_prefix(&node_dir).unwrap_or(&file);
    let text = String::from_utf8_lossy(&ctx.control.read_file(node, relative)?).into_owned();
    Ok((!clock::is_reset(&text)).then(|| text.trim().to_string()))
}

/// Sets `nodes`' clocks back to +0 and records it.
pub fn reset_clocks(ctx: &NemesisContext, nodes: &[String], last: bool) {
    let value = json!({
        "nodes": nodes,
        "mode": "reset",
        "offset_ms": 0,
        "mechanism": clock_mechanism(ctx.control.as_ref()),
    });
    record_undo(ctx, F::Clock, single(nodes), value, last, || {
        let mut errors = BTreeMap::new();
        for node in nodes {
            if let Err(e) = set_clock(ctx, node, ClockSetting::Offset(0)) {
                errors.insert(node.clone(), format!("{e:#}"));
            }
        }
        errors
    });
}

/// The `node` field of an event about `nodes`: set only when it is one node.
fn single(nodes: &[String]) -> Option<&str> {
    match nodes {
        [one] => Some(one.as_str()),
        _ => None,
    }
}

//! Reconfig: servers removed from the ensemble's config through the leader (ZooKeeper's
//! incremental `reconfig -remove`, fle-node's `POST /reconfig`), undone by adding them back
//! with their own server lines (`reconfig -add`). The removed servers keep running: a correct
//! one stays LOOKING (fle-node) or follows as a non-voter (ZooKeeper) until it is added back.
//! With `role = "observer"` voters are demoted instead (`reconfig -add` of their line as an
//! observer's), and the undo promotes them back; with `role = "participant"` observers are
//! promoted to voters, and the undo demotes them again. All are recorded as `remove` and
//! `add`, with the role in the value.
//!
//! - At most a minority of the voters is out at once (a target that names more is cut to the
//!   first of them, said in the value's `note`): adding them back needs a quorum of the whole
//!   ensemble synced with the leader (NewConfigNoQuorum), which only the members can be.
//! - The change is asked of the leader when one is known, else of each other node in turn
//!   until one takes it (a follower forwards it; a looking server answers 503).
//! - Its undo, and the final heal's, try again for a while when the ensemble is electing
//!   (503): a reconfig's commit ends the term, so the next one often meets an election.
//! - With `replace = true` the removed servers are replaced once the remove commits: killed,
//!   wiped and started afresh (`replace_servers`), so the undo adds back servers with empty
//!   data dirs (a Kubernetes pod replaced on a new volume; ZOOKEEPER-4352's shape).
//! - The simulator cannot model it (its ensemble never changes) and refuses it before a run.

use super::kill::undo_value;
use super::{
    signal_all, single, start_again, target_line, Active, Fault, Order, RecordedStart, Replayed,
    SimWorld,
};
use crate::api::ConfigView;
use crate::control::sut::{DataOutcome, Member};
use crate::history::{
    sid_of, EventType, FaultKind, FaultValue, F, NEMESIS, OBSERVER_ROLE, PARTICIPANT_ROLE,
};
use crate::nemesis::raw_fault::RawFault;
use crate::nemesis::schedule::{FaultTemplate, PlannedFault, TargetSpec};
use crate::nemesis::seam::NemesisContext;
use crate::nemesis::targets::{resolve, Ensemble, Resolved};
use anyhow::{bail, Result};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

pub struct Reconfig;

/// How long an undo keeps asking while the ensemble cannot take a reconfig (503).
const UNDO_PATIENCE: Duration = Duration::from_secs(20);
/// Between two asks of an undo.
const UNDO_RETRY: Duration = Duration::from_millis(200);
/// A leader read longer ago than this is not trusted to say the config.
const LEADER_MAX_AGE_NS: u64 = 2_000_000_000;

impl Fault for Reconfig {
    fn kind(&self) -> FaultKind {
        FaultKind::Reconfig
    }

    /// The target's nodes, cut to a minority of the voters (see the module doc).
    fn targets(
        &self,
        spec: &TargetSpec,
        ens: Ensemble,
        leader: Option<&str>,
        pick: u64,
    ) -> Resolved {
        let mut r = resolve(spec, ens, leader, pick);
        let most = most_out(ens.nodes.len() - ens.observers.len());
        if r.nodes.len() > most {
            r.nodes.truncate(most);
            r.note = Some(format!(
                "cut to {most}: removing more than a minority of the voters could never be undone"
            ));
        }
        r
    }

    fn apply(&self, ctx: &NemesisContext, order: &Order) -> Result<Active> {
        let mut value = order.base.clone();
        (ctx.recorder).record(
            NEMESIS,
            EventType::Invoke,
            F::Remove,
            single(order.nodes()),
            value.clone(),
        );
        // Against the config in force: faults still in force (or an add that failed) may
        // have taken some out already.
        let leader = ctx
            .observations
            .leader(ctx.recorder.now(), LEADER_MAX_AGE_NS);
        let config = leader.as_ref().and_then(|(_, s)| s.config.as_ref());
        let voters = order.ens.nodes.len() - order.ens.observers.len();
        let t = &order.fault.template;
        // Only a voter can be demoted, only an observer promoted: as the config in force
        // lists it (the static one: as test.json does).
        let observing = |n: &String| {
            config.map_or(order.ens.observers.contains(n), |c| {
                sid_of(n).is_some_and(|s| c.observers.contains(&s))
            })
        };
        let wanted: Vec<String> = (order.nodes().iter())
            .filter(|n| (!t.demote || !observing(n)) && (!t.promote || observing(n)))
            .cloned()
            .collect();
        // A promotion takes no voter out.
        let nodes = &match t.promote {
            true => wanted,
            false => removable(&wanted, config, voters),
        };
        if nodes.len() < order.nodes().len() {
            value["asked"] = json!(order.nodes());
            value["nodes"] = json!(nodes);
        }
        if nodes.is_empty() && t.promote {
            bail!("none of them is an observer now: promoted already, or not an observer");
        }
        if nodes.is_empty() {
            bail!("none of them can leave now: out of the config already, or the rest would be no quorum of the ensemble");
        }
        let asks = ask_order(order.leader, order.ens.nodes, nodes);
        let (via, outcome) = if t.demote || t.promote {
            let role = match t.promote {
                true => crate::history::PARTICIPANT_ROLE,
                false => crate::history::OBSERVER_ROLE,
            };
            value["role"] = json!(role);
            ask(ctx, &asks, &members(nodes, &[], Some(t.demote)), &[])
        } else {
            ask(ctx, &asks, &[], nodes)
        };
        value["via"] = json!(via);
        match outcome {
            DataOutcome::Ok(version) => {
                value["version"] = json!(version);
                if t.replace {
                    value["replace"] = json!(true);
                }
                ctx.recorder
                    .record(NEMESIS, EventType::Info, F::Remove, single(nodes), value);
                if t.replace {
                    replace_servers(ctx, nodes, order.base);
                }
                Ok(Active::new(self.kind(), nodes.to_vec()))
            }
            // Unknown: it may have been removed; its undo adds it back either way.
            DataOutcome::Info(e) => {
                value["error"] = json!(e);
                ctx.recorder
                    .record(NEMESIS, EventType::Info, F::Remove, single(nodes), value);
                Ok(Active::new(self.kind(), nodes.to_vec()))
            }
            DataOutcome::Refused(e) | DataOutcome::Unavailable(e) => bail!("{e}"),
        }
    }

    fn undo(&self, ctx: &NemesisContext, active: &Active) {
        add_back(ctx, active.nodes(), false);
    }

    /// Every node added back (those still members change nothing).
    fn heal_all(&self, ctx: &NemesisContext, nodes: &[String]) {
        add_back(ctx, nodes, true);
    }

    /// Refused before a simulated run (`commands::sim::cli::cannot_model`): nothing is done.
    fn apply_sim(&self, _: &mut dyn SimWorld, _: &Order, _: u64, _: &mut Value) -> Vec<String> {
        Vec::new()
    }

    fn undo_sim(&self, _: &mut dyn SimWorld, _: &[String], _: u64) {}

    fn cannot_simulate(&self, _: &FaultTemplate) -> Option<&'static str> {
        Some("reconfig (the simulated ensemble never changes its membership)")
    }

    fn keys(&self) -> &'static [&'static str] {
        &["role", "replace"]
    }

    fn read_keys(&self, raw: &RawFault, t: &mut FaultTemplate) -> Result<(), String> {
        if let Some(role) = &raw.role {
            match role.as_str() {
                OBSERVER_ROLE => t.demote = true,
                PARTICIPANT_ROLE => t.promote = true,
                _ => return Err(format!("role = \"{role}\" is unknown; use \"observer\" (voters demoted, they stay as observers), \"participant\" (observers promoted to voters) or leave it out (the servers leave the config)")),
            }
        }
        if let Some(replace) = raw.replace {
            if replace && (t.demote || t.promote) {
                return Err("replace = true and role do not go together: a replaced server leaves the config; drop one of them".into());
            }
            t.replace = replace;
        }
        Ok(())
    }

    fn step_lines(&self, s: &PlannedFault) -> String {
        let t = &s.template;
        let mut out = target_line(t);
        if t.demote {
            out.push_str(&format!("role = \"{OBSERVER_ROLE}\"\n"));
        }
        if t.promote {
            out.push_str(&format!("role = \"{PARTICIPANT_ROLE}\"\n"));
        }
        if t.replace {
            out.push_str("replace = true\n");
        }
        out
    }

    fn replayed(&self, mut t: FaultTemplate, start: &RecordedStart) -> Replayed {
        let role = start.value.role.as_deref();
        t.demote = role == Some(OBSERVER_ROLE);
        t.promote = role == Some(PARTICIPANT_ROLE);
        t.replace = start.value.replace;
        Ok(Some(t))
    }
}

/// Replaces servers a committed reconfig removed: each is killed, wiped (`Target::wipe`) and
/// started afresh on the first config, recorded as a `kill` marked `replace` and a `start`
/// marked `wiped` (the checkers judge it from there as a new server). Only once the remove
/// certainly committed: wiping a server still in the config could take a write a quorum
/// acknowledged, the operator's mistake rather than the system's. A server that cannot be
/// wiped is started on its old data, said in the start's `wipe_errors`.
fn replace_servers(ctx: &NemesisContext, nodes: &[String], base: &Value) {
    let mut kill = base.clone();
    kill["nodes"] = json!(nodes);
    kill["replace"] = json!(true);
    let _ = signal_all(ctx, nodes, F::Kill, &kill, |n| ctx.target.kill(n));
    let (mut wiped, mut kept, mut errors) = (Vec::new(), Vec::new(), serde_json::Map::new());
    for node in nodes {
        match ctx.target.wipe(node) {
            Ok(()) => wiped.push(node.clone()),
            Err(e) => {
                errors.insert(node.clone(), json!(format!("{e:#}")));
                kept.push(node.clone());
            }
        }
    }
    if !wiped.is_empty() {
        let mut fresh = FaultValue::undo(FaultKind::Kill, &wiped, false);
        fresh.wiped = true;
        start_again(ctx, &wiped, &fresh.to_json());
    }
    if !kept.is_empty() {
        let mut value = undo_value(FaultKind::Kill, &kept);
        value["wipe_errors"] = Value::Object(errors);
        start_again(ctx, &kept, &value);
    }
}

/// How many of `voters` may be out of the config at once: a minority (at least one), so the
/// rest stay a quorum of the ensemble and can add them back.
pub fn most_out(voters: usize) -> usize {
    (voters - crate::api::quorum(voters)).max(1)
}

/// The nodes of `wanted` that can leave the config in force (`config`; None: the static one,
/// listing every node) now: those it lists, as many as leave a quorum of all `voters` in it.
fn removable(wanted: &[String], config: Option<&ConfigView>, voters: usize) -> Vec<String> {
    let listed = |n: &&String| config.is_none_or(|c| sid_of(n).is_some_and(|s| c.lists(s)));
    let in_config = config.map_or(voters, |c| c.voters.len());
    let room = in_config.saturating_sub(crate::api::quorum(voters));
    wanted.iter().filter(listed).take(room).cloned().collect()
}

/// Whom to ask, in order: the leader when one is known, then every node not in `skip`.
fn ask_order(leader: Option<&str>, all: &[String], skip: &[String]) -> Vec<String> {
    let others = all
        .iter()
        .filter(|n| !skip.contains(n) && Some(n.as_str()) != leader);
    leader
        .map(str::to_string)
        .into_iter()
        .chain(others.cloned())
        .collect()
}

/// Asks each node of `asks` in turn until one answers other than 503 / unreachable: the node
/// that answered last and its outcome.
fn ask(
    ctx: &NemesisContext,
    asks: &[String],
    add: &[Member],
    remove: &[String],
) -> (String, DataOutcome<u64>) {
    let mut last = (
        String::new(),
        DataOutcome::Unavailable("no node to ask".into()),
    );
    for via in asks {
        let outcome = ctx.target.reconfig(via, add, remove);
        let again = matches!(outcome, DataOutcome::Unavailable(_));
        last = (via.clone(), outcome);
        if !again {
            break;
        }
    }
    last
}

/// `nodes` as the members a reconfig lists: as observers when `observer` says so, else in
/// the role test.json gives them (an observer when `observers` names it).
fn members(nodes: &[String], observers: &[String], observer: Option<bool>) -> Vec<Member> {
    let member = |n: &String| Member {
        node: n.clone(),
        observer: observer.unwrap_or_else(|| observers.contains(n)),
    };
    nodes.iter().map(member).collect()
}

/// Adds `nodes` back in their own roles, asking again while the ensemble cannot take it,
/// recorded as `add` (`last`: the final heal's). Those the leader's config already lists in
/// their roles are left out; when none is missing nothing is asked (`unchanged`).
fn add_back(ctx: &NemesisContext, nodes: &[String], last: bool) {
    let mut value = undo_value(FaultKind::Reconfig, nodes);
    if last {
        value["final"] = json!(true);
    }
    ctx.recorder.record(
        NEMESIS,
        EventType::Invoke,
        F::Add,
        single(nodes),
        value.clone(),
    );
    let all = ctx.observations.nodes().to_vec();
    let deadline = Instant::now() + UNDO_PATIENCE;
    let asked = loop {
        let leader = ctx
            .observations
            .leader(ctx.recorder.now(), LEADER_MAX_AGE_NS);
        let observers = &ctx.settings.observers;
        let missing = match &leader {
            Some((_, status)) => missing_from(nodes, status.config.as_ref(), observers),
            // No leader seen lately: ask for all of them (members change nothing).
            None => nodes.to_vec(),
        };
        if missing.is_empty() {
            break None;
        }
        // Not the nodes being added: out of the config, they cannot take it.
        let asks = ask_order(leader.as_ref().map(|(n, _)| n.as_str()), &all, &missing);
        let (via, outcome) = ask(ctx, &asks, &members(&missing, observers, None), &[]);
        if !matches!(outcome, DataOutcome::Unavailable(_)) || Instant::now() >= deadline {
            break Some((via, missing, outcome));
        }
        crate::control::blocking(|| std::thread::sleep(UNDO_RETRY));
    };
    let kind = match asked {
        None => {
            value["unchanged"] = json!(true);
            EventType::Info
        }
        Some((via, missing, outcome)) => {
            value["via"] = json!(via);
            value["added"] = json!(missing);
            match outcome {
                DataOutcome::Ok(version) => {
                    value["version"] = json!(version);
                    EventType::Info
                }
                DataOutcome::Info(e) => {
                    value["error"] = json!(e);
                    EventType::Info
                }
                DataOutcome::Refused(e) | DataOutcome::Unavailable(e) => {
                    value["error"] = json!(e);
                    EventType::Fail
                }
            }
        }
    };
    ctx.recorder
        .record(NEMESIS, kind, F::Add, single(nodes), value);
}

/// The nodes of `nodes` that `config` does not list in the role test.json gives them (a voter
/// out of it or demoted, an observer out of it; none under the static config, which lists
/// every node so).
fn missing_from(
    nodes: &[String],
    config: Option<&ConfigView>,
    observers: &[String],
) -> Vec<String> {
    let Some(c) = config else { return Vec::new() };
    let in_role = |n: &&String| {
        let role = match observers.contains(n) {
            true => &c.observers,
            false => &c.voters,
        };
        sid_of(n).is_some_and(|s| role.contains(&s))
    };
    nodes.iter().filter(|n| !in_role(n)).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: u64) -> Vec<String> {
        (1..=n).map(|i| format!("n{i}")).collect()
    }

    #[test]
    fn a_target_is_cut_to_a_minority_of_the_voters_and_says_so() {
        let (nodes, observers) = (names(5), Vec::new());
        let ens = Ensemble {
            nodes: &nodes,
            observers: &observers,
        };
        let all = Reconfig.targets(&TargetSpec::All, ens, Some("n5"), 1);
        assert_eq!(all.nodes.len(), 2, "{all:?}");
        assert!(all.note.is_some_and(|n| n.contains("cut to 2")));
        let leader = Reconfig.targets(&TargetSpec::Leader, ens, Some("n5"), 1);
        assert_eq!((leader.nodes, leader.note), (vec!["n5".to_string()], None));
        // Three voters and two observers: one voter at most.
        let observers = vec!["n4".to_string(), "n5".to_string()];
        let ens = Ensemble {
            nodes: &nodes,
            observers: &observers,
        };
        assert_eq!(
            Reconfig.targets(&TargetSpec::All, ens, None, 1).nodes.len(),
            1
        );
    }

    #[test]
    fn the_leader_is_asked_first_then_every_other_node() {
        let nodes = names(4);
        let removed = vec!["n2".to_string()];
        assert_eq!(ask_order(Some("n3"), &nodes, &removed), ["n3", "n1", "n4"]);
        assert_eq!(ask_order(None, &nodes, &[]), ["n1", "n2", "n3", "n4"]);
    }

    #[test]
    fn only_listed_nodes_leave_and_a_quorum_of_the_ensemble_stays() {
        let nodes = names(5);
        let config = ConfigView {
            observers: vec![],
            version: 7,
            voters: vec![1, 2, 3, 5],
        };
        // n4 is out already; of the four in, one more may leave (3 of 5 stay).
        let wanted = vec!["n4".to_string(), "n2".to_string(), "n3".to_string()];
        assert_eq!(removable(&wanted, Some(&config), 5), ["n2"]);
        // Under the static config two may leave.
        assert_eq!(removable(&wanted, None, 5), ["n4", "n2"]);
        assert!(removable(
            &nodes[..1],
            Some(&ConfigView {
                voters: vec![1, 2, 3],
                ..config
            }),
            5
        )
        .is_empty());
    }

    #[test]
    fn members_take_the_role_asked_or_their_own() {
        let nodes = names(2);
        let observers = ["n2".to_string()];
        let roles = |m: Vec<Member>| m.into_iter().map(|m| m.observer).collect::<Vec<_>>();
        assert_eq!(roles(members(&nodes, &observers, None)), [false, true]);
        assert_eq!(roles(members(&nodes, &observers, Some(true))), [true, true]);
    }

    #[test]
    fn only_nodes_the_config_does_not_list_are_added_back() {
        let nodes = names(5);
        let config = ConfigView {
            observers: vec![5],
            version: 7,
            voters: vec![1, 3],
        };
        assert_eq!(missing_from(&nodes, Some(&config), &[]), ["n2", "n4", "n5"]);
        // n5 is an observer in test.json: listed as one, it is where it belongs.
        let observers = ["n5".to_string()];
        assert_eq!(
            missing_from(&nodes, Some(&config), &observers),
            ["n2", "n4"]
        );
        // A voter demoted to an observer is missing from the voters.
        let demoted = ConfigView {
            observers: vec![3, 5],
            voters: vec![1, 2, 4],
            ..config
        };
        assert_eq!(missing_from(&nodes, Some(&demoted), &observers), ["n3"]);
        // The static config lists every node.
        assert!(missing_from(&nodes, None, &[]).is_empty());
    }
}

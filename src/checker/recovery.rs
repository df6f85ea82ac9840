//! recovery: after the final heal, a quorum-backed leader is observed within a bound and every
//! node that is up rejoins it within a bound; during the run, a calm group is never without a
//! quorum-backed leader beyond a bound, and none of its members stays out of broadcast beside
//! that leader beyond the stall bound (availability, see `availability`); and,
//! measured for the report: for every fault, the time until a quorum-backed leader is observed
//! again; every leaderless window; every overlap where two servers both claim to lead (in
//! different epochs: a stale leader, reported but not invalid; the same epoch is
//! election-safety's violation).
//!
//! Every one of these facts is `history::view`'s (the one definition of a quorum-backed
//! leader: a leader in an established epoch plus followers in broadcast, a quorum, none cut
//! off from it by an active partition, none killed or paused). This checker only feeds the
//! digest to a `View` and judges what it derived. After a fault, and after the final heal,
//! only reads taken after it count, so a leader seen just before a kill, or a leader a
//! partition just cut off from its followers, does not count as "observed again".

use super::availability;
use super::finding::{EvRef, Finding, Item};
use super::model::{Digest, Rec};
use super::CheckOptions;
use crate::duration::moment;
use crate::history::test_info::TestInfo;
use crate::history::view::{
    FaultInterval, FaultRecovery, Fed, FinalHeal, Finished, Overlap, Stall, Stray, View, Window,
};
use serde::{Deserialize, Serialize};

pub const NAME: &str = "recovery";

/// What the recovery checker measured (results.json `measurements` of "recovery").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecoveryMeasurements {
    pub bound_ms: u64,
    pub quorum: usize,
    /// From the final heal to the first quorum-backed leader read after it.
    pub final_heal_to_quorum_leader_ms: Option<u64>,
    /// From the final heal until every node that is up had rejoined that leader
    /// (`View::settled`).
    #[serde(default)]
    pub final_heal_to_all_rejoined_ms: Option<u64>,
    /// The bound on `final_heal_to_all_rejoined_ms` (`availability::rejoin_bound_ms`).
    #[serde(default)]
    pub rejoin_bound_ms: u64,
    /// The bound on a stall (`availability::stall_bound_ms`).
    #[serde(default)]
    pub stall_bound_ms: u64,
    /// Stretches a calm group had no quorum-backed leader, longest first (the first 100).
    #[serde(default)]
    pub stalls: Vec<Stall>,
    #[serde(default)]
    pub stalls_count: usize,
    /// The bound on a stray (`availability::stray_bound_ms`).
    #[serde(default)]
    pub stray_bound_ms: u64,
    /// Stretches a calm-group member stayed out of broadcast beside its leader, longest first (10).
    #[serde(default)]
    pub strays: Vec<Stray>,
    /// Every fault (the first 1000), in start order, with its time to a quorum-backed leader.
    pub faults: Vec<FaultRecovery>,
    /// Each fault from start to undo (the first 1000).
    #[serde(default)]
    pub fault_intervals: Vec<FaultInterval>,
    /// Stretches without a quorum-backed leader (the first 1000; counts cover all).
    pub leaderless_windows: Vec<Window>,
    pub leaderless_windows_count: usize,
    pub leaderless_ms_total: u64,
    pub leaderless_ms_max: Option<u64>,
    /// Stretches in which two or more servers claimed to lead (the first 1000).
    pub leader_overlaps: Vec<Overlap>,
    pub leader_overlaps_count: usize,
    pub leader_overlap_ms_total: u64,
}

/// The default bound: a stale leader or follower notices after syncLimit ticks; the election
/// then takes finalizeWait (200 ms) plus notification backoff, and followers get initLimit ticks
/// to connect and sync; 2 s more covers restarting killed processes.
pub fn default_bound_ms(info: &TestInfo) -> u64 {
    (info.sync_limit as u64 + info.init_limit as u64) * info.tick_ms + 2000
}

/// Feeds a digest to a view, in history order.
pub fn view_of(d: &Digest, info: &TestInfo) -> Finished {
    view_with(d, info, |_, _, _| {}, |_, _, _| {})
}

/// `view_of`, calling `before(view, fed, record)` just before each record is fed and
/// `after(view, record, view index of the record's node)` right after: other checkers
/// (leader-stepdown) and the coverage ask the same view in the same pass.
pub fn view_with(
    d: &Digest,
    info: &TestInfo,
    mut before: impl FnMut(&View, &Fed<'_>, &Rec),
    mut after: impl FnMut(&View, &Rec, Option<usize>),
) -> Finished {
    // The digest's nodes are test.json's first: a quorum is a majority of those.
    let mut view = info.view();
    view.set_clock_faults_touch(info.fake_monotonic());
    // Digest node index -> view node index.
    let map: Vec<usize> = d.nodes.iter().map(|n| view.node_ix(n)).collect();
    // The config changes, in history order: each is the node's from the read that showed it.
    let mut configs = d.configs.iter().peekable();
    for r in d.records() {
        if let Rec::Status(s) = r {
            while let Some(c) = configs.next_if(|c| c.pos <= s.pos) {
                if let Ok(config) = &c.config {
                    view.config_seen(map[c.node as usize], config.clone());
                }
            }
        }
        let fed = r.fed(&map);
        before(&view, &fed, r);
        view.feed(fed);
        let ix = match r {
            Rec::Status(s) => Some(map[s.node as usize]),
            Rec::Unreachable { node, .. } => Some(map[*node as usize]),
            _ => None,
        };
        after(&view, r, ix);
    }
    view.finish()
}

pub fn check(d: &Digest, info: &TestInfo, opts: &CheckOptions) -> Finding {
    judge(&view_of(d, info), d, info, opts)
}

/// What the final heal is judged against: the view, the voters that refused their damaged
/// files (owed nothing), and the bounds.
struct AfterHeal<'a> {
    v: &'a Finished,
    refused: &'a [String],
    /// A quorum-backed leader is owed within this many ms of the final heal.
    bound_ms: u64,
    /// Every node that is up is owed a rejoin within this many ms of it.
    rejoin_ms: u64,
}

/// The verdict on a finished view (`d`: its digest, for the refusals): the final heal's
/// recovery, then the calm quorums' stalls and strays.
pub fn judge(v: &Finished, d: &Digest, info: &TestInfo, opts: &CheckOptions) -> Finding {
    // Voters that refused to start on damaged files are out for good (`crash` records it);
    // when the rest are no quorum, no leader is owed and liveness cannot be judged.
    let refused: Vec<String> = d
        .refused_at_end()
        .into_iter()
        .map(|n| d.name(n).to_string())
        .collect();
    let voters = info.voters().len();
    let left = voters.saturating_sub(
        refused
            .iter()
            .filter(|n| !info.observers.contains(n))
            .count(),
    );
    if !refused.is_empty() && left < info.quorum() {
        let gap = format!(
            "{} refused to start on damaged files and never came back: the {left} other voter(s) are no quorum of {voters}, so no leader was owed and recovery cannot be judged.",
            refused.join(", "),
        );
        return Finding::judge(Vec::new(), vec![(gap, Vec::new())], String::new());
    }
    let bound_ms = opts
        .recovery_bound_ms
        .unwrap_or_else(|| default_bound_ms(info));
    let rejoin_ms = availability::rejoin_bound_ms(bound_ms, info);
    let mut violations: Vec<Item> = Vec::new();
    let mut gaps: Vec<Item> = Vec::new();
    let after = AfterHeal {
        v,
        refused: &refused,
        bound_ms,
        rejoin_ms,
    };
    let mut ok = judge_final_heal(&after, &mut violations, &mut gaps);
    // `--recovery-bound-ms` bounds every election it judges: the stall bound too.
    let stall_ms = opts
        .recovery_bound_ms
        .unwrap_or_else(|| availability::stall_bound_ms(info));
    let settle = stall_ms;
    let (stalled, unsure) = availability::judge_stalls(&v.stalls, stall_ms, settle);
    if stalled.is_empty() && unsure.is_empty() && !ok.is_empty() {
        ok.push_str(&format!(
            " No calm quorum was without a quorum-backed leader for {stall_ms} ms or more, or deposed {} healthy leaders after standing {settle} ms.", availability::MIN_DEPOSED
        ));
    }
    violations.extend(stalled);
    gaps.extend(unsure);
    let stray_ms = availability::stray_bound_ms(stall_ms, info);
    let until = v.final_heal.map_or(u64::MAX, |h| h.time);
    let (strays, unsure) = availability::judge_strays(&v.strays, stray_ms, until);
    if strays.is_empty() && unsure.is_empty() && !ok.is_empty() {
        ok.push_str(&format!(
            " No member of a calm quorum stayed out of broadcast beside its standing leader for {stray_ms} ms or more."
        ));
    }
    violations.extend(strays);
    gaps.extend(unsure);
    let story = narrative(v);
    let mut f = Finding::judge(violations, gaps, ok);
    f.explanation = format!("{} {story}", f.explanation).trim().to_string();
    let mut m = measurements(v, bound_ms);
    m.rejoin_bound_ms = rejoin_ms;
    m.stall_bound_ms = stall_ms;
    m.stray_bound_ms = stray_ms;
    f.with_measurements(m)
}

/// Recovery after the final heal: a quorum-backed leader within the bound, then every node
/// rejoined within its own; returns the valid verdict's words so far.
fn judge_final_heal(a: &AfterHeal, violations: &mut Vec<Item>, gaps: &mut Vec<Item>) -> String {
    let (v, bound_ms) = (a.v, a.bound_ms);
    let bound_ns = bound_ms * 1_000_000;
    let mut ok = String::new();
    let Some(h) = v.final_heal else {
        gaps.push((
            "The history has no final heal (no nemesis event with \"final\": true): the run may have ended early, so recovery cannot be judged.".to_string(),
            vec![],
        ));
        return ok;
    };
    let heal = EvRef::new(h.pos, "final heal");
    match h.recovered {
        Some((took, q)) => {
            let (l, e) = (q.sid, q.epoch);
            let agreed = EvRef::new(q.pos, format!("a quorum follows n{l} (epoch {e})"));
            if took > bound_ns {
                violations.push((
                    format!("After the final heal a quorum-backed leader (n{l}, epoch {e}) was observed only after {}, beyond the bound of {bound_ms} ms.", moment(took)),
                    vec![heal.clone(), agreed.clone()],
                ));
            } else {
                ok = format!("After the final heal a quorum followed n{l} (epoch {e}) within {} (bound {bound_ms} ms).", moment(took));
            }
            judge_rejoin(a, &h, (l, e), (heal, agreed), violations, &mut ok);
        }
        None => {
            let seen = v.end_ns.saturating_sub(h.time);
            if seen >= bound_ns {
                violations.push((
                    format!("No quorum-backed leader was observed in the {} the history covers after the final heal (bound {bound_ms} ms).", moment(seen)),
                    vec![heal],
                ));
            } else {
                gaps.push((
                    format!("The history ends {} after the final heal, before the bound of {bound_ms} ms, with no quorum-backed leader observed yet.", moment(seen)),
                    vec![heal],
                ));
            }
        }
    }
    ok
}

/// Every node that was up rejoined the leader `l` of epoch `e` after the final heal (with the
/// heal and the quorum's agreement as evidence) within the rejoin bound, but for the voters that refused their
/// damaged files; adds to the valid verdict's words `ok`.
fn judge_rejoin(
    a: &AfterHeal,
    h: &FinalHeal,
    (l, e): (u64, u64),
    (heal, agreed): (EvRef, EvRef),
    violations: &mut Vec<Item>,
    ok: &mut String,
) {
    let rejoin_ms = a.rejoin_ms;
    let rejoin_ns = rejoin_ms * 1_000_000;
    // The controller waits (up to --recovery-timeout) for every node to rejoin
    // before its final reads: one that never did is a liveness failure, but
    // for a node that refused its damaged files.
    let seen = a.v.end_ns.saturating_sub(h.time);
    let stragglers: Vec<_> = (a.v.final_stragglers.iter())
        .filter(|(n, _)| !a.refused.contains(n))
        .collect();
    match h.rejoined {
        Some(all) if all > rejoin_ns => {
            violations.push((
                format!("After the final heal every node that was up rejoined n{l} (epoch {e}) only {} after it, beyond the bound of {rejoin_ms} ms.", moment(all)),
                vec![heal.clone(), agreed],
            ));
        }
        Some(all) => ok.push_str(&format!(
            " Every node had rejoined it {} after the heal (bound {rejoin_ms} ms).",
            moment(all)
        )),
        None if stragglers.is_empty() && !a.refused.is_empty() => ok.push_str(&format!(
            " Every node rejoined it but {}, which refused to start on damaged files (crash).",
            a.refused.join(", ")
        )),
        None if !stragglers.is_empty() && seen >= rejoin_ns => {
            let who: Vec<String> = stragglers
                .iter()
                .map(|(n, r)| straggler(n, r.as_ref()))
                .collect();
            let evidence = stragglers
                .iter()
                .filter_map(|(n, r)| r.map(|r| EvRef::new(r.pos, format!("{n}'s last read"))))
                .chain([heal])
                .collect();
            violations.push((
                format!("After the final heal not every node rejoined n{l} (epoch {e}) in the {} the history covers (bound {rejoin_ms} ms): {}.", moment(seen), who.join("; ")),
                evidence,
            ));
        }
        None => {}
    }
}

/// Leaderless windows and leader overlaps in words: valid, as in ZooKeeper, but a reader must
/// see them (the first few of each, with totals).
fn narrative(v: &Finished) -> String {
    const SHOWN: usize = 3;
    let mut out = Vec::new();
    if v.windows.is_empty() {
        out.push("There was no leaderless window.".to_string());
    } else {
        let total: u64 = v.windows.iter().map(|w| w.ms).sum();
        let listed: Vec<String> = v
            .windows
            .iter()
            .take(SHOWN)
            .map(|w| {
                let open = if w.open_at_end {
                    ", still open at the end"
                } else {
                    ""
                };
                format!("{} ms from {}{open}", w.ms, moment(w.start_ns))
            })
            .collect();
        out.push(format!(
            "{} leaderless window(s) (no quorum-backed leader), {total} ms in all: {}{}.",
            v.windows.len(),
            listed.join(", "),
            if v.windows.len() > SHOWN { ", ..." } else { "" }
        ));
    }
    if !v.overlaps.is_empty() {
        let listed: Vec<String> = v
            .overlaps
            .iter()
            .take(SHOWN)
            .map(|o| {
                let who: Vec<String> = o
                    .leaders
                    .iter()
                    .map(|c| format!("{} (epoch {})", c.node, c.epoch))
                    .collect();
                format!(
                    "{} for {} ms from {}",
                    who.join(" and "),
                    o.ms,
                    moment(o.start_ns)
                )
            })
            .collect();
        out.push(format!(
            "{} leader overlap(s), where a stale leader still claimed to lead beside another (valid in ZooKeeper until the stale one notices it lost its quorum): {}{}.",
            v.overlaps.len(),
            listed.join("; "),
            if v.overlaps.len() > SHOWN { "; ..." } else { "" }
        ));
    }
    out.join(" ")
}

impl From<RecoveryMeasurements> for super::Measurements {
    fn from(m: RecoveryMeasurements) -> Self {
        super::Measurements::Recovery(Box::new(m))
    }
}

/// What a node that never rejoined last reported.
fn straggler(node: &str, read: Option<&crate::history::view::NodeRead>) -> String {
    match read {
        Some(r) => format!(
            "{node} last reported {:?} in {:?} (leader {}, epoch {})",
            r.state,
            r.phase,
            r.leader.map_or("none".into(), |l| format!("n{l}")),
            r.peer_epoch
        ),
        None => format!("{node} could not be read"),
    }
}

fn measurements(v: &Finished, bound_ms: u64) -> RecoveryMeasurements {
    let total = |ms: &mut dyn Iterator<Item = u64>| ms.sum::<u64>();
    RecoveryMeasurements {
        bound_ms,
        quorum: v.quorum,
        final_heal_to_quorum_leader_ms: v
            .final_heal
            .and_then(|h| h.recovered)
            .map(|r| r.0 / 1_000_000),
        final_heal_to_all_rejoined_ms: v
            .final_heal
            .and_then(|h| h.rejoined)
            .map(|ns| ns / 1_000_000),
        leaderless_windows_count: v.windows.len(),
        leaderless_ms_total: total(&mut v.windows.iter().map(|w| w.ms)),
        leaderless_ms_max: v.windows.iter().map(|w| w.ms).max(),
        leader_overlaps_count: v.overlaps.len(),
        leader_overlap_ms_total: total(&mut v.overlaps.iter().map(|w| w.ms)),
        faults: capped(&v.recoveries),
        fault_intervals: capped(&v.intervals),
        leaderless_windows: capped(&v.windows),
        leader_overlaps: capped(&v.overlaps),
        rejoin_bound_ms: 0,
        stall_bound_ms: 0,
        stalls_count: v.stalls.len(),
        stalls: {
            let mut s = v.stalls.clone();
            s.sort_by_key(|x| std::cmp::Reverse(x.ms));
            s.truncate(100);
            s
        },
        stray_bound_ms: 0,
        strays: {
            let mut s = v.strays.clone();
            s.sort_by_key(|x| std::cmp::Reverse(x.ms));
            s.truncate(10);
            s
        },
    }
}

/// A flapping cluster can open thousands of windows: list the first 1000 (counts and totals
/// cover them all).
fn capped<T: Clone>(v: &[T]) -> Vec<T> {
    v[..v.len().min(1000)].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Event;

    const MS: u64 = 1_000_000;

    fn info() -> TestInfo {
        serde_json::from_value(serde_json::json!({
            "name": "t", "target": "fle", "nodes": ["n1", "n2", "n3"], "workload": "election",
            "nemesis": ["partition"], "seed": 1, "time_limit_s": 10.0, "tick_ms": 100,
            "init_limit": 5, "sync_limit": 2, "started_at": "2026-11-30T00:00:00Z",
            "replay_command": "x", "version": "0"
        }))
        .unwrap()
    }

    fn ev(
        i: usize,
        ms: u64,
        process: &str,
        f: &str,
        node: Option<&str>,
        value: serde_json::Value,
    ) -> Event {
        serde_json::from_value(serde_json::json!({
            "index": i, "time": ms * MS, "process": process,
            "type": if process == "nemesis" { "info" } else { "ok" },
            "f": f, "node": node, "value": value
        }))
        .unwrap()
    }

    fn read(i: usize, ms: u64, sid: u64, state: &str, leader: Option<u64>, epoch: u64) -> Event {
        let n = format!("n{sid}");
        let phase = if state == "LOOKING" {
            "election"
        } else {
            "broadcast"
        };
        ev(
            i,
            ms,
            &n,
            "status",
            Some(&n),
            serde_json::json!({
                "state": state, "leader": leader, "peer_epoch": epoch, "zab_phase": phase,
                "accepted_epoch": epoch, "last_zxid": 0, "last_committed_zxid": 0
            }),
        )
    }

    /// The bug this replaced: after an isolate-leader partition, the cut-off leader and its
    /// followers (which had not noticed yet) were counted as a quorum-backed leader at once.
    #[test]
    fn isolate_leader_recovery_is_the_new_leaders_election() {
        let drops = serde_json::json!({"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]});
        let events = vec![
            read(0, 10, 1, "LEADING", Some(1), 1),
            read(1, 11, 2, "FOLLOWING", Some(1), 1),
            read(2, 12, 3, "FOLLOWING", Some(1), 1),
            ev(
                3,
                100,
                "nemesis",
                "partition",
                None,
                serde_json::json!({"nodes": ["n1"], "shape": "isolate-leader", "drops": drops}),
            ),
            read(4, 103, 1, "LEADING", Some(1), 1),
            read(5, 104, 2, "FOLLOWING", Some(1), 1),
            read(6, 106, 3, "FOLLOWING", Some(1), 1),
            read(7, 900, 2, "LOOKING", None, 1),
            read(8, 1400, 3, "LEADING", Some(3), 2),
            read(9, 1450, 2, "FOLLOWING", Some(3), 2),
            ev(
                10,
                2000,
                "nemesis",
                "heal",
                None,
                serde_json::json!({"nodes": ["n1", "n2", "n3"], "final": true}),
            ),
            read(11, 2050, 3, "LEADING", Some(3), 2),
            read(12, 2100, 1, "FOLLOWING", Some(3), 2),
        ];
        let d = super::super::model::digest_events(&events, &info().nodes).unwrap();
        let f = check(&d, &info(), &CheckOptions::default());
        assert_eq!(f.valid, crate::checker::Validity::True, "{}", f.explanation);
        let m = f.measurements.recovery().unwrap();
        let r = &m.faults[0];
        assert_eq!(
            (r.kind, r.ms_to_quorum_leader, r.leader.as_deref()),
            (crate::history::FaultKind::Partition, Some(1350), Some("n3"))
        );
        assert_eq!(m.final_heal_to_quorum_leader_ms, Some(100));
        assert_eq!(m.fault_intervals[0].end_ns, Some(2000 * MS));
    }

    /// The view of a history file fed line by line (the report's and the recorder's way).
    fn view_of_lines(path: &std::path::Path, nodes: &[String]) -> Finished {
        let mut v = View::new(nodes);
        crate::history::read::for_each(path, |at, l, _| {
            let e = v.of_line(at.pos, l);
            v.feed(e)
        })
        .unwrap();
        v.finish()
    }

    /// Both ways of feeding a view give the same facts: every fixture, and a history with the
    /// events the two used to treat differently (a final log read later than every status, a
    /// node exit, an unknown `f`, a failed read naming no node, a follower behind the
    /// leader's commits: the digest used to drop the first four and not carry commits).
    #[test]
    fn lines_and_the_digest_feed_a_view_alike() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut runs: Vec<std::path::PathBuf> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("history.jsonl").exists())
            .collect();
        assert!(runs.len() > 40, "fixtures missing under {}", root.display());
        let tmp = tempfile::tempdir().unwrap();
        let status = |t: u64, n: u64, state: &str, leader: &str, phase: &str, committed: u64| {
            format!(
                r#"{{"index":0,"time":{},"process":"n{n}","type":"ok","f":"status","node":"n{n}","value":{{"state":"{state}","leader":{leader},"peer_epoch":1,"accepted_epoch":1,"zab_phase":"{phase}","last_zxid":{committed},"last_committed_zxid":{committed}}}}}"#,
                t * MS
            )
        };
        let lines = [
            status(10, 1, "LEADING", "1", "broadcast", 5),
            status(11, 2, "FOLLOWING", "1", "broadcast", 5),
            status(12, 3, "FOLLOWING", "1", "broadcast", 3),
            r#"{"index":3,"time":20000000,"process":"nemesis","type":"info","f":"kill","value":{"nodes":["n1"]}}"#.into(),
            status(30, 2, "LOOKING", "null", "election", 5),
            r#"{"index":5,"time":40000000,"process":"n3","type":"info","f":"node-exit","node":"n3","value":{"status":1,"signal":null,"caused_by_controller":false,"log_tail":[]}}"#.into(),
            r#"{"index":6,"time":50000000,"process":"n9","type":"info","f":"status","value":{"error":"timed out"}}"#.into(),
            r#"{"index":7,"time":60000000,"process":"nemesis","type":"info","f":"power-cut-2","value":{"x":1}}"#.into(),
            r#"{"index":8,"time":70000000,"process":"nemesis","type":"info","f":"start","value":{"nodes":["n1"],"final":true}}"#.into(),
            status(80, 1, "LEADING", "1", "broadcast", 5),
            status(81, 2, "FOLLOWING", "1", "broadcast", 5),
            status(82, 3, "FOLLOWING", "1", "broadcast", 3),
            status(90, 3, "FOLLOWING", "1", "broadcast", 5),
            r#"{"index":13,"time":900000000,"process":"final","type":"ok","f":"final-log","node":"n1","value":{"entries":[],"last_committed_zxid":5}}"#.into(),
        ];
        let odd = tmp.path().join("odd");
        std::fs::create_dir_all(&odd).unwrap();
        // Indices in file order, as the writer gives them.
        let lines: Vec<String> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let end = l.find(",\"time\"").unwrap();
                format!("{{\"index\":{i}{}", &l[end..])
            })
            .collect();
        std::fs::write(odd.join("history.jsonl"), lines.join("\n") + "\n").unwrap();
        runs.push(odd);
        for run in &runs {
            let path = run.join("history.jsonl");
            let nodes = match TestInfo::read(&run.join("test.json")) {
                Ok(i) => i.nodes,
                Err(_) => info().nodes,
            };
            let by_lines = view_of_lines(&path, &nodes);
            let (d, _) = crate::checker::load::digest_file(&path, &nodes).unwrap();
            assert_eq!(d.records().count() as u64, d.events, "{}", run.display());
            let mut i = info();
            i.nodes = nodes;
            let by_digest = view_of(&d, &i);
            assert_eq!(
                format!("{by_lines:?}"),
                format!("{by_digest:?}"),
                "{}",
                run.display()
            );
        }
    }

    /// Two of three voters refused to start on damaged files and never came back: no leader
    /// is owed, so recovery is unknown, not invalid; with one refused it is judged as ever.
    #[test]
    fn voters_refused_for_good_below_a_quorum_make_recovery_unknown() {
        let corrupt = |i: usize, t: u64, n: &str| {
            format!(
                r#"{{"index":{i},"time":{t},"process":"nemesis","type":"info","f":"corrupt","value":{{"nodes":["{n}"]}}}}"#
            )
        };
        let exit = |i: usize, t: u64, n: &str| {
            format!(
                r#"{{"index":{i},"time":{t},"process":"{n}","type":"info","f":"node-exit","node":"{n}","value":{{"status":1,"signal":null,"caused_by_controller":false,"log_tail":["Unable to load database"]}}}}"#
            )
        };
        let heal = r#"{"index":4,"time":9000000000,"process":"nemesis","type":"info","f":"heal","value":{"final":true}}"#.to_string();
        let lines = [
            corrupt(0, 1_000_000_000, "n1"),
            exit(1, 2_000_000_000, "n1"),
            corrupt(2, 3_000_000_000, "n2"),
            exit(3, 4_000_000_000, "n2"),
            heal,
            // n3 alone, LOOKING, past the bound.
            r#"{"index":5,"time":11000000000,"process":"n3","type":"ok","f":"status","node":"n3","value":{"state":"LOOKING","leader":null,"peer_epoch":1,"accepted_epoch":1,"zab_phase":"election","last_zxid":0,"last_committed_zxid":0}}"#.to_string(),
        ];
        let nodes: Vec<String> = ["n1", "n2", "n3"].map(String::from).to_vec();
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let d = crate::checker::model::digest_lines(&lines, &nodes).unwrap();
        let opts = CheckOptions {
            recovery_bound_ms: Some(1000),
            ..Default::default()
        };
        let f = check(&d, &info(), &opts);
        assert_eq!(
            f.valid,
            crate::checker::Validity::Unknown,
            "{}",
            f.explanation
        );
        assert!(
            f.explanation.contains("n1, n2 refused"),
            "{}",
            f.explanation
        );
        // One refused: two voters are a quorum, and no leader after the heal is a violation.
        let d = crate::checker::model::digest_lines(&lines[2..], &nodes).unwrap();
        let f = check(&d, &info(), &opts);
        assert_eq!(
            f.valid,
            crate::checker::Validity::False,
            "{}",
            f.explanation
        );
    }
}

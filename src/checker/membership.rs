//! membership: under dynamic reconfiguration (ZooKeeper 3.5+'s `reconfig`), every server
//! leads and counts votes only under the config it runs, and the ensemble ends on one config.
//!
//! Each server runs test.json's static config (its nodes, observers apart; version 0) until a
//! status read reports another (`config`: version, voters, observers). Then:
//! - a server read leading an established epoch is a voter of its config, or hands over
//!   within a leader's Zab timeout (`leader_stepdown::broadcast_bound_ns`): fle-node's leader
//!   steps down when the config that removes it commits; ZooKeeper's stops committing and its
//!   followers go to the designated leader (docs/membership.md). A removed leader, or
//!   an observer, leading on is the ZOOKEEPER-3829/3830 shape: a leader the others no longer
//!   follow;
//! - a decided election counted a quorum of the deciding server's config's voters, and no
//!   server outside it (a removed server never counts toward a quorum), but against
//!   ZooKeeper a voter of the next config: it counts the voters of the config it has seen
//!   proposed too (`TestInfo::counts_next_config_votes`). The election is judged against the
//!   config of the read that first showed it or of the one before (it was decided in
//!   between; a reconfig activated in between changes the config, not the vote);
//! - a config was committed by a quorum of its voters and of the previous config's: a server
//!   activates a config only once committed, so a voter read later (by more than the read
//!   slack) with a log short of the config's zxid had not logged it when it committed (a
//!   committed txn never leaves a log; servers a `corrupt` fault damaged are left out). Only
//!   where reads show the logged zxid (fle-node): ZooKeeper's show the applied one;
//! - at the end, no member of the newest config serves (in broadcast) under an older one.
//!
//! Without any reported config the run had no reconfig: `vote-rule` and `observers` judge the
//! static config, and this checker says so. One leader per epoch across configs is
//! `election-safety`'s rule, which holds whatever the configs.

use super::finding::{EvRef, Finding, Item};
use super::model::{Digest, NodeIx, Rec, Status};
use super::CheckOptions;
use crate::api::{quorum, ConfigView, ZabPhase};
use crate::history::sid_of;
use crate::history::test_info::TestInfo;
use crate::history::F;
use std::collections::BTreeMap;

pub const NAME: &str = "membership";

/// How a config is named in findings: its version and voters.
fn name(c: &ConfigView) -> String {
    format!("config {:#x} (voters {:?})", c.version, c.voters)
}

/// test.json's ensemble as a config: its nodes, the observers apart, version 0. A server
/// runs it until it reports another.
fn static_config(info: &TestInfo) -> ConfigView {
    let sids = |names: &[String]| names.iter().filter_map(|n| sid_of(n)).collect();
    ConfigView {
        observers: sids(&info.observers),
        version: 0,
        voters: sids(&info.voters()),
    }
}

/// Judges commits, leaders, counted votes and the final configs against each server's config.
pub fn check(d: &Digest, info: &TestInfo, opts: &CheckOptions) -> Finding {
    let mut violations: Vec<Item> = Vec::new();
    if d.configs.is_empty() {
        let none = "No server reported a changed config: the run had no reconfig (vote-rule and observers judge the static config).";
        return Finding::judge(violations, Vec::new(), none.into());
    }
    let gaps: Vec<Item> = d.configs.iter().filter_map(|c| {
        let why = c.config.as_ref().err()?;
        let name = d.name(c.node);
        Some((
            format!("{name}'s config cannot be read ({why}): its reads after it are judged against its previous config."),
            vec![EvRef::new(c.pos, format!("{name}'s config"))],
        ))
    }).collect();
    let fixed = static_config(info);
    let commits = match info.reads_show_logged_zxid() {
        true => {
            let judged =
                committed_without_quorums(d, &fixed, opts.read_slack_ns(), &mut violations);
            format!("no read after {judged} configs were first in force showed fewer than a quorum of their voters or of the previous config's holding them")
        }
        false => {
            "commits were not judged (reads show the zxid a server applied, not the one it logged)"
                .to_string()
        }
    };
    for el in &d.elections {
        let [before, at] = d
            .configs_around(el.node, el.pos)
            .map(|c| c.unwrap_or(&fixed));
        let votes = el.summary.votes.iter().map(|v| v.sid);
        let next = |c: &ConfigView| d.next_config(c).filter(|_| info.counts_next_config_votes());
        if let Some(why) = bad_votes(votes, [before, at], next) {
            violations.push((
                format!(
                    "{}'s election of round {} (leader n{}) {why}.",
                    d.name(el.node),
                    el.summary.round,
                    el.summary.leader
                ),
                vec![EvRef::new(
                    el.pos,
                    format!("{}'s decided election", d.name(el.node)),
                )],
            ));
        }
    }
    let mut outside = Outside::new(
        d.nodes.len(),
        super::leader_stepdown::broadcast_bound_ns(info, opts),
    );
    // Each node's config as of the read at hand: the changes are walked once, in history
    // order beside the reads (a long run has many of both).
    let mut current: Vec<Option<&ConfigView>> = vec![None; d.nodes.len()];
    let mut changes = d.configs.iter().peekable();
    let mut last_read: Vec<Option<&Status>> = vec![None; d.nodes.len()];
    let mut leader_reads = 0u64;
    for s in d.statuses() {
        while let Some(c) = changes.next_if(|c| c.pos <= s.pos) {
            if let Ok(view) = &c.config {
                current[c.node as usize] = Some(view);
            }
        }
        leader_reads += u64::from(s.leads().is_some());
        let config = current[s.node as usize].unwrap_or(&fixed);
        outside.read(d, s, config, &mut violations);
        last_read[s.node as usize] = Some(s);
    }
    let last_read: Vec<Option<(&Status, &ConfigView)>> = (last_read.iter().zip(&current))
        .map(|(s, c)| s.map(|s| (s, c.unwrap_or(&fixed))))
        .collect();
    let newest = ended_behind(d, &last_read, &mut violations);
    let ok = format!(
        "Servers reported {} config changes, the newest {}: {commits}, {leader_reads} reads of an established leader were of a voter of its config or within {} ms of its handing over, {} decided elections counted a quorum of their config's voters (and no one outside it but the next config's), and no member of the newest config ended serving under an older one.",
        d.configs.len(),
        newest.map_or("unknown".into(), name),
        outside.bound_ns / 1_000_000,
        d.elections.len(),
    );
    Finding::judge(violations, gaps, ok)
}

/// A violation for each config first read in force (committed) while reads of its voters, or
/// of the previous config's, taken later by more than `slack_ns` show more logs short of its
/// zxid than a quorum leaves out: no quorum of them had logged it when it committed. Returns
/// how many configs were judged.
fn committed_without_quorums(
    d: &Digest,
    fixed: &ConfigView,
    slack_ns: u64,
    violations: &mut Vec<Item>,
) -> usize {
    // The first read showing each version, with its time.
    let mut first: BTreeMap<u64, (u32, NodeIx, &ConfigView)> = BTreeMap::new();
    for c in &d.configs {
        if let Ok(v) = &c.config {
            first.entry(v.version).or_insert((c.pos, c.node, v));
        }
    }
    // One walk: each node's reads (time, last zxid) in time order, the time of each config's
    // first read, and the nodes a `corrupt` fault damaged or a `replace` wiped (their logs may
    // have lost what they held).
    let mut reads: Vec<Vec<(u64, u64)>> = vec![Vec::new(); d.nodes.len()];
    let mut time_at: BTreeMap<u32, u64> = first.values().map(|(pos, ..)| (*pos, 0)).collect();
    let mut damaged = vec![false; d.nodes.len()];
    for r in d.records() {
        for n in d.started_afresh(r) {
            damaged[n as usize] = true;
        }
        match r {
            Rec::Status(s) => {
                reads[s.node as usize].push((s.time, s.last_zxid));
                if let Some(t) = time_at.get_mut(&s.pos) {
                    *t = s.time;
                }
            }
            Rec::Nemesis(op) if op.f == F::Corrupt => {
                for n in &op.value.nodes {
                    if let Some(i) = d.nodes.iter().position(|x| x == n) {
                        damaged[i] = true;
                    }
                }
            }
            _ => {}
        }
    }
    let mut previous = fixed;
    for (version, (pos, node, config)) in &first {
        let after = time_at[pos] + slack_ns;
        // A voter's first read after `after`, when it shows a log short of the config.
        let short = |sid: &u64| -> Option<String> {
            let n = d.node_of_sid(*sid).filter(|n| !damaged[*n as usize])?;
            let r = &reads[n as usize];
            let (t, zxid) = r.get(r.partition_point(|(t, _)| *t <= after))?;
            (zxid < version).then(|| {
                format!(
                    "n{sid} (last zxid {zxid:#x} at {})",
                    crate::duration::moment(*t)
                )
            })
        };
        for (whose, c) in [("its", *config), ("the previous", previous)] {
            let lacking: Vec<String> = c.voters.iter().filter_map(short).collect();
            if lacking.len() > c.voters.len() - quorum(c.voters.len()) {
                violations.push((
                    format!(
                        "{} was in force at {}'s read at {}, yet later reads of {whose} voters {:?} show {}: fewer than a quorum ({}) of them had logged it when it committed.",
                        name(config),
                        d.name(*node),
                        crate::duration::moment(time_at[pos]),
                        c.voters,
                        lacking.join(", "),
                        quorum(c.voters.len())
                    ),
                    vec![EvRef::new(*pos, format!("{}'s read of {}", d.name(*node), name(config)))],
                ));
                break;
            }
        }
        previous = config;
    }
    first.len()
}

/// Why votes counted by `sids` are no quorum of voters under either config `under` (the one
/// before the read that showed the election, the one at it), if they are not; a vote of a
/// voter of a config's `next` one may count besides.
fn bad_votes<'a>(
    sids: impl Iterator<Item = u64> + Clone,
    under: [&'a ConfigView; 2],
    next: impl Fn(&ConfigView) -> Option<&'a ConfigView>,
) -> Option<String> {
    let why = |c: &ConfigView| {
        let next = next(c);
        let outside: Vec<u64> = (sids.clone())
            .filter(|s| !c.voters.contains(s) && !next.is_some_and(|n| n.voters.contains(s)))
            .collect();
        let counted = sids.clone().filter(|s| c.voters.contains(s)).count();
        if let Some(s) = outside.first() {
            Some(format!(
                "counted the vote of n{s}, not a voter of its {}",
                name(c)
            ))
        } else if counted < quorum(c.voters.len()) {
            Some(format!(
                "counted {counted} votes, short of a quorum ({}) of its {}",
                quorum(c.voters.len()),
                name(c)
            ))
        } else {
            None
        }
    };
    let [before, at] = under;
    let first = why(before)?;
    why(at).map(|_| first)
}

/// Leaders outside their config's voters (removed, or made observers), each from its first
/// such LEADING read of an epoch: one still LEADING that epoch later than `bound_ns` is not
/// handing over, a violation (once per node and epoch).
struct Outside {
    /// Per node: since when (time, position) it has led this epoch outside its config.
    open: Vec<Option<(u64, u32, u64)>>,
    /// Per node: the epoch last flagged.
    flagged: Vec<Option<u64>>,
    bound_ns: u64,
}

impl Outside {
    fn new(nodes: usize, bound_ns: u64) -> Self {
        Outside {
            open: vec![None; nodes],
            flagged: vec![None; nodes],
            bound_ns,
        }
    }

    /// Status read `s`, of a server whose config is `config`.
    fn read(&mut self, d: &Digest, s: &Status, config: &ConfigView, violations: &mut Vec<Item>) {
        let Some(sid) = d.sid(s.node) else { return };
        let i = s.node as usize;
        let epoch = s.leads().filter(|_| !config.voters.contains(&sid));
        let Some(epoch) = epoch else {
            self.open[i] = None;
            return;
        };
        let (since, pos, e) = *self.open[i].get_or_insert((s.time, s.pos, epoch));
        if e != epoch {
            self.open[i] = Some((s.time, s.pos, epoch));
            return;
        }
        if s.time - since <= self.bound_ns || self.flagged[i] == Some(epoch) {
            return;
        }
        self.flagged[i] = Some(epoch);
        let role = if config.lists(sid) {
            "an observer of"
        } else {
            "not in"
        };
        let who = d.name(s.node);
        violations.push((
            format!(
                "{who} led epoch {epoch} from {} to {} while {role} its {}, longer than the {} ms a leader has to hand over: only a voter of the config may lead.",
                crate::duration::moment(since),
                crate::duration::moment(s.time),
                name(config),
                self.bound_ns / 1_000_000,
            ),
            vec![
                EvRef::new(pos, format!("{who} LEADING outside its config")),
                EvRef::new(s.pos, format!("{who} still LEADING")),
            ],
        ));
    }
}

/// A violation for each member of the newest config whose last read serves (broadcast) under
/// an older config; returns the newest config.
fn ended_behind<'a>(
    d: &Digest,
    last: &'a [Option<(&'a Status, &'a ConfigView)>],
    violations: &mut Vec<Item>,
) -> Option<&'a ConfigView> {
    let newest = last
        .iter()
        .flatten()
        .map(|(_, c)| c)
        .max_by_key(|c| c.version)?;
    for (i, read) in last.iter().enumerate() {
        let Some((s, c)) = read else { continue };
        let member = d.sid(i as NodeIx).is_some_and(|sid| newest.lists(sid));
        if member && c.version < newest.version && s.phase == ZabPhase::Broadcast {
            violations.push((
                format!(
                    "{} ended serving under {} while the newest, {}, lists it: the ensemble did not end on one config.",
                    d.name(s.node),
                    name(c),
                    name(newest)
                ),
                vec![EvRef::new(s.pos, format!("{}'s last read", d.name(s.node)))],
            ));
        }
    }
    Some(newest)
}

//! membership: under dynamic reconfiguration (ZooKeeper 3.5+'s `reconfig`), every server
//! leads and counts votes only under the config it runs, and the ensemble ends on one config.
//!
//! Each server runs test.json's static config (its nodes, observers apart; version 0) until a
//! status read reports another (`config`: version, voters, observers). Then:
//! - a server read leading an established epoch is a voter of its config (a removed leader,
//!   or an observer, leading is the ZOOKEEPER-3829/3830 shape: a leader the others no longer
//!   follow);
//! - a decided election counted only voters of the deciding server's config, and a quorum of
//!   them (a removed server never counts toward a quorum). The election is judged against the
//!   config of the read that first showed it or of the one before (it was decided in between;
//!   a reconfig activated in between changes the config, not the vote);
//! - at the end, no member of the newest config serves (in broadcast) under an older one.
//!
//! Without any reported config the run had no reconfig: `vote-rule` and `observers` judge the
//! static config, and this checker says so. One leader per epoch across configs is
//! `epoch-leaders`' rule, which holds whatever the configs.

use super::finding::{EvRef, Finding, Item};
use super::model::{Digest, NodeIx, Rec, Status};
use crate::api::{quorum, ConfigView, ZabPhase};
use crate::history::sid_of;
use crate::history::test_info::TestInfo;

pub const NAME: &str = "membership";

/// A server's config as this checker follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Config {
    version: u64,
    voters: Vec<u64>,
    observers: Vec<u64>,
}

impl Config {
    fn of(view: &ConfigView) -> Config {
        Config {
            version: view.version,
            voters: view.voters.clone(),
            observers: view.observers.clone(),
        }
    }

    fn lists(&self, sid: u64) -> bool {
        self.voters.contains(&sid) || self.observers.contains(&sid)
    }

    fn name(&self) -> String {
        format!("config {:#x} (voters {:?})", self.version, self.voters)
    }
}

/// Each node's config over the history: the static one, then each reported change in order.
struct Configs {
    current: Vec<Config>,
    /// The config of each node's previous status read (an election is judged against it too).
    before_read: Vec<Config>,
    next: usize,
}

impl Configs {
    fn new(d: &Digest, info: &TestInfo) -> Configs {
        let is_voter = |n: &&String| !info.observers.contains(n);
        let sids = |names: Vec<&String>| names.into_iter().filter_map(|n| sid_of(n)).collect();
        let static_config = Config {
            version: 0,
            voters: sids(info.nodes.iter().filter(is_voter).collect()),
            observers: sids(info.observers.iter().collect()),
        };
        Configs {
            current: vec![static_config.clone(); d.nodes.len()],
            before_read: vec![static_config; d.nodes.len()],
            next: 0,
        }
    }

    /// Applies the changes reported up to `pos` (the read at `pos` included).
    fn advance(&mut self, d: &Digest, pos: u32, gaps: &mut Vec<Item>) {
        while let Some(seen) = d.configs.get(self.next).filter(|c| c.pos <= pos) {
            self.next += 1;
            match &seen.config {
                Ok(view) => self.current[seen.node as usize] = Config::of(view),
                Err(why) => gaps.push((
                    format!("{}'s config cannot be read ({why}): its reads after it are judged against its previous config.", d.name(seen.node)),
                    vec![EvRef::new(seen.pos, format!("{}'s config", d.name(seen.node)))],
                )),
            }
        }
    }
}

/// Judges leaders, counted votes and the final configs against each server's config.
pub fn check(d: &Digest, info: &TestInfo) -> Finding {
    let mut violations: Vec<Item> = Vec::new();
    let mut gaps: Vec<Item> = Vec::new();
    if d.configs.is_empty() {
        let none = "No server reported a changed config: the run had no reconfig (vote-rule and observers judge the static config).";
        return Finding::judge(violations, gaps, none.into());
    }
    let mut configs = Configs::new(d, info);
    let mut elections = d.elections.iter().peekable();
    let mut flagged_leader = vec![None::<u64>; d.nodes.len()];
    let mut last_read: Vec<Option<(&Status, Config)>> = vec![None; d.nodes.len()];
    let (mut leader_reads, mut judged_elections) = (0u64, 0usize);
    for rec in d.records() {
        let Rec::Status(s) = rec else { continue };
        configs.advance(d, s.pos, &mut gaps);
        let node = s.node as usize;
        let config = configs.current[node].clone();
        while let Some(el) = elections.next_if(|e| e.pos <= s.pos) {
            let i = el.node as usize;
            let under = [&configs.before_read[i], &configs.current[i]];
            judged_elections += 1;
            if let Some(why) = bad_votes(el.summary.votes.iter().map(|v| v.sid), under) {
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
        if s.leads().is_some() {
            leader_reads += 1;
            not_a_voter_leading(d, s, &config, &mut flagged_leader, &mut violations);
        }
        configs.before_read[node] = config.clone();
        last_read[node] = Some((s, config));
    }
    let newest = ended_behind(d, &last_read, &mut violations);
    let ok = format!(
        "Servers reported {} config changes, the newest {}: {leader_reads} reads of an established leader were of a voter of its config, {judged_elections} decided elections counted a quorum of their config's voters only, and no member of the newest config ended serving under an older one.",
        d.configs.len(),
        newest.map_or("unknown".into(), |c| c.name()),
    );
    Finding::judge(violations, gaps, ok)
}

/// Why votes counted by `sids` are no quorum of voters under either config `under` (the one
/// before the read that showed the election, the one at it), if they are not.
fn bad_votes(sids: impl Iterator<Item = u64> + Clone, under: [&Config; 2]) -> Option<String> {
    let why = |c: &Config| {
        let outside: Vec<u64> = sids.clone().filter(|s| !c.voters.contains(s)).collect();
        let counted = sids.clone().filter(|s| c.voters.contains(s)).count();
        if let Some(s) = outside.first() {
            Some(format!(
                "counted the vote of n{s}, not a voter of its {}",
                c.name()
            ))
        } else if counted < quorum(c.voters.len()) {
            Some(format!(
                "counted {counted} votes, short of a quorum ({}) of its {}",
                quorum(c.voters.len()),
                c.name()
            ))
        } else {
            None
        }
    };
    let [before, at] = under;
    let first = why(before)?;
    why(at).map(|_| first)
}

/// A violation the first time a server is read leading an established epoch under a config
/// (`flagged`: the version last flagged per node) that does not make it a voter.
fn not_a_voter_leading(
    d: &Digest,
    s: &Status,
    config: &Config,
    flagged: &mut [Option<u64>],
    violations: &mut Vec<Item>,
) {
    let Some(sid) = d.sid(s.node) else { return };
    let seen = &mut flagged[s.node as usize];
    if config.voters.contains(&sid) || *seen == Some(config.version) {
        return;
    }
    *seen = Some(config.version);
    let role = if config.lists(sid) {
        "an observer of"
    } else {
        "not in"
    };
    violations.push((
        format!(
            "{} led epoch {} at {} while {role} its {}: only a voter of the config may lead.",
            d.name(s.node),
            s.peer_epoch,
            crate::duration::moment(s.time),
            config.name()
        ),
        vec![EvRef::new(s.pos, format!("{} LEADING", d.name(s.node)))],
    ));
}

/// A violation for each member of the newest config whose last read serves (broadcast) under
/// an older config; returns the newest config.
fn ended_behind<'a>(
    d: &Digest,
    last: &'a [Option<(&Status, Config)>],
    violations: &mut Vec<Item>,
) -> Option<&'a Config> {
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
                    c.name(),
                    newest.name()
                ),
                vec![EvRef::new(s.pos, format!("{}'s last read", d.name(s.node)))],
            ));
        }
    }
    Some(newest)
}

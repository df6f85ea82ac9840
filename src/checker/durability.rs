//! durability (writes workload): every acknowledged write is in the final committed log, at the
//! zxid it was acknowledged with; the final logs of all nodes are one total order (each a prefix
//! of the longest); no value appears twice; a write that failed (certainly not applied) is
//! absent, and no value appears that no client ever wrote. Lost, duplicated and phantom writes
//! are listed.
//!
//! An acknowledged write is lost when it is absent from the final leader's log (the node whose
//! last read shows it leading the highest epoch: a leader's log never lacks a write committed
//! before or during its term) or from a majority of the voters' final logs (a committed write
//! is on a quorum, and a quorum never forgets it; an observer's log counts toward neither side). Otherwise a node whose final log is a strict prefix
//! of the longest is a lagging minority that may simply not have caught up, and a node whose
//! log could not be read says nothing: both make the verdict unknown, never true.
//!
//! What it cannot see: writes whose outcome is unknown (`info`) are neither required nor
//! forbidden; a lagging minority is not told apart from one that lost writes for good. It
//! needs the writes workload.

use super::divergence;
use super::finding::{EvRef, Finding, Item, KindedItem};
use super::fxhash::{map_with, FastMap};
use super::kind::Kind;
use super::model::{Digest, FinalLog, Rec, WriteOp};
use crate::history::test_info::TestInfo;
use crate::history::EventType;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

pub const NAME: &str = "durability";

/// What the clients did with one value.
#[derive(Default)]
struct Fate<'a> {
    invoke: Option<&'a WriteOp>,
    ok: Option<&'a WriteOp>,
    fail: Option<&'a WriteOp>,
}

/// Why an entry of a final log is wrong on its own (no value twice in a log, each written by a
/// client, none that certainly failed).
enum EntryIssue<'a> {
    /// The value was at an earlier entry too, with this zxid.
    Twice(u64),
    /// No client wrote it.
    Unwritten,
    /// Its write certainly failed.
    Failed(&'a WriteOp),
}

/// The issues of one log's entries, in entry order: (entry, issue).
fn entry_issues<'a>(
    entries: &'a [(u64, String)],
    fates: &FastMap<&str, Fate<'a>>,
) -> Vec<(usize, EntryIssue<'a>)> {
    let mut seen: FastMap<&str, u64> = map_with(entries.len());
    let mut issues = Vec::new();
    for (i, (zxid, v)) in entries.iter().enumerate() {
        // The ensemble's own txns (a reconfig's new config) are no client's write.
        if fle_node::membership::is_reconfig_text(v) {
            continue;
        }
        if let Some(first) = seen.insert(v.as_str(), *zxid) {
            issues.push((i, EntryIssue::Twice(first)));
            continue;
        }
        match fates.get(v.as_str()) {
            None => issues.push((i, EntryIssue::Unwritten)),
            Some(Fate {
                fail: Some(f),
                ok: None,
                ..
            }) => issues.push((i, EntryIssue::Failed(f))),
            _ => {}
        }
    }
    issues
}

pub fn check(d: &Digest, info: &TestInfo) -> Finding {
    let seen = Seen::of(d);
    let fates = &seen.fates;
    // With writes but none acknowledged the logs are still judged (a failed write in a log is
    // a violation), but nothing durable was tested: a gap either way.
    let acknowledged = fates.values().filter(|f| f.ok.is_some()).count();
    let mut gaps: Vec<Item> = super::nothing_acknowledged(NAME, info, seen.writes, acknowledged)
        .into_iter()
        .collect();
    if seen.writes == 0 {
        return Finding::judge(vec![], gaps, String::new());
    }
    let mut violations: Vec<KindedItem> = Vec::new();
    let refused: Vec<String> = d
        .refused_at_end()
        .into_iter()
        .map(|n| d.name(n).to_string())
        .collect();
    gaps.extend(unread_logs(d, info, &seen.logs, &refused));
    let Some(logs) = Logs::of(d, &seen.logs) else {
        gaps.push(("No final log could be read.".to_string(), vec![]));
        return Finding::judge_kinds(violations, gaps, String::new());
    };
    let final_leader = seen.final_leader();
    let is_prefix = logs.divergences(fates, &mut violations, &mut gaps);
    let mut listed = Listed::default();
    let longest_issues = logs.entry_violations(&is_prefix, fates, &mut listed, &mut violations);
    let acked = logs.ack_violations(
        (&is_prefix, &longest_issues),
        fates,
        (final_leader, info.quorum(), &info.observers),
        &mut listed,
        &mut violations,
    );
    let invoked = fates.values().filter(|f| f.invoke.is_some()).count();
    let (readable, longest) = (logs.readable.len(), logs.longest.len());
    let mut ok = format!(
        "All {acked} acknowledged writes are in the final logs at their zxids; the {readable} readable final logs are identical ({longest} entries), with no value twice, none that failed and none that no client wrote."
    );
    if !refused.is_empty() {
        ok.push_str(&format!(
            " Not counted: {}, which refused to start on a damaged file (crash).",
            refused.join(", ")
        ));
    }
    let m = DurabilityMeasurements {
        write_events: seen.writes,
        invoked,
        acknowledged: acked,
        final_log_entries: longest,
        lost: cap(&listed.lost),
        duplicated: cap(&listed.duplicated),
        phantom: cap(&listed.phantom),
    };
    Finding::judge_kinds(violations, gaps, ok).with_measurements(super::Measurements::Durability(m))
}

/// One pass over the digest: each value's fate, each node's last final log, how many write
/// events, and what each node's last read led.
struct Seen<'a> {
    fates: FastMap<&'a str, Fate<'a>>,
    logs: BTreeMap<u16, &'a FinalLog>,
    writes: usize,
    /// The last read of each node: the final leader is the one leading the highest epoch.
    last_lead: Vec<Option<u64>>,
}

impl<'a> Seen<'a> {
    fn of(d: &'a Digest) -> Seen<'a> {
        let mut fates: FastMap<&str, Fate> = FastMap::default();
        let mut logs: BTreeMap<u16, &FinalLog> = BTreeMap::new();
        let mut writes = 0usize;
        // The last read of each node: the final leader is the one leading the highest epoch.
        let mut last_lead: Vec<Option<u64>> = vec![None; d.nodes.len()];
        for r in d.records() {
            match r {
                Rec::Status(s) => last_lead[s.node as usize] = s.leads(),
                Rec::Write(w) => {
                    writes += 1;
                    let Some(v) = w.value.as_deref() else {
                        continue;
                    };
                    let fate = fates.entry(v).or_default();
                    match w.kind {
                        EventType::Invoke => fate.invoke = fate.invoke.or(Some(w)),
                        EventType::Ok => fate.ok = Some(w),
                        EventType::Fail => fate.fail = Some(w),
                        EventType::Info => {}
                    }
                }
                // The last final read of a node counts.
                Rec::FinalLog(l) => {
                    logs.insert(l.node, l);
                }
                _ => {}
            }
        }
        Seen {
            fates,
            logs,
            writes,
            last_lead,
        }
    }

    /// The final leader's readable log: the node whose last read led the highest epoch.
    fn final_leader(&self) -> Option<ReadLog<'a>> {
        let last_lead = &self.last_lead;
        (0..last_lead.len())
            .filter_map(|i| Some((last_lead[i]?, i as u16)))
            .max()
            .and_then(|(_, n)| self.logs.get(&n).copied())
            .and_then(|l| Some((l, l.entries.as_ref().ok()?)))
    }
}

/// A final log that could be read, with its entries.
type ReadLog<'a> = (&'a FinalLog, &'a Vec<(u64, String)>);

/// The nodes of test.json whose final log was never read or could not be read (but for those
/// that refused to start on a damaged file).
fn unread_logs(
    d: &Digest,
    info: &TestInfo,
    logs: &BTreeMap<u16, &FinalLog>,
    refused: &[String],
) -> Vec<Item> {
    let mut gaps = Vec::new();
    for name in info.nodes.iter().filter(|n| !refused.contains(n)) {
        let ix = d.nodes.iter().position(|x| x == name).map(|i| i as u16);
        match ix.and_then(|i| logs.get(&i)) {
            None => gaps.push((format!("{name}'s final log was never read."), vec![])),
            Some(l) => {
                if let Err(why) = &l.entries {
                    gaps.push((
                        format!("{name}'s final log could not be read ({why})."),
                        vec![EvRef::new(l.pos, format!("{name} final log unreadable"))],
                    ));
                }
            }
        }
    }
    gaps
}

/// The values listed in results.json's measurements.
#[derive(Default)]
struct Listed<'a> {
    lost: BTreeSet<&'a str>,
    duplicated: BTreeSet<&'a str>,
    phantom: BTreeSet<&'a str>,
}

/// The readable final logs, judged against the longest of them.
struct Logs<'a> {
    d: &'a Digest,
    readable: Vec<ReadLog<'a>>,
    longest_log: &'a FinalLog,
    longest: &'a Vec<(u64, String)>,
    lname: &'a str,
}

impl<'a> Logs<'a> {
    fn of(d: &'a Digest, logs: &BTreeMap<u16, &'a FinalLog>) -> Option<Logs<'a>> {
        let readable: Vec<ReadLog<'a>> = logs
            .values()
            .filter_map(|l| l.entries.as_ref().ok().map(|e| (*l, e)))
            .collect();
        let &(longest_log, longest) = readable.iter().max_by_key(|(_, e)| e.len())?;
        Some(Logs {
            d,
            lname: d.name(longest_log.node),
            readable,
            longest_log,
            longest,
        })
    }

    /// One total order: every log a prefix of the longest. Returns, per readable log, whether
    /// it is one.
    fn divergences(
        &self,
        fates: &FastMap<&str, Fate>,
        violations: &mut Vec<KindedItem>,
        gaps: &mut Vec<Item>,
    ) -> Vec<bool> {
        let Logs {
            d,
            readable,
            longest_log,
            longest,
            lname,
        } = self;
        let (longest_log, longest, lname) = (*longest_log, *longest, *lname);
        let named: Vec<divergence::NamedLog> = readable
            .iter()
            .map(|(l, e)| (d.name(l.node), e.as_slice()))
            .collect();
        let acknowledged = |v: &str| fates.get(v).is_some_and(|f| f.ok.is_some());
        let mut is_prefix: Vec<bool> = Vec::with_capacity(readable.len());
        for (l, entries) in readable {
            let name = d.name(l.node);
            let diverges = entries.iter().zip(longest.iter()).position(|(a, b)| a != b);
            is_prefix.push(diverges.is_none());
            if let Some(i) = diverges {
                let (shape, kind) = divergence::describe(
                    (name, entries),
                    (lname, longest),
                    i,
                    &named,
                    &acknowledged,
                );
                violations.push((kind, (
                    format!(
                        "The final logs of {name} and {lname} diverge at entry {i}: zxid {:#x} {} vs zxid {:#x} {}. {shape}",
                        entries[i].0, entries[i].1, longest[i].0, longest[i].1
                    ).trim_end().to_string(),
                    vec![
                        EvRef::new(l.pos, format!("{name} final log")).at_entry(i),
                        EvRef::new(longest_log.pos, format!("{lname} final log")).at_entry(i),
                    ],
                )));
            } else if entries.len() < longest.len() {
                gaps.push((
                    format!(
                        "{name}'s final log holds {} of the {} entries of {lname}'s (a prefix: it may not have caught up).",
                        entries.len(),
                        longest.len()
                    ),
                    vec![EvRef::new(l.pos, format!("{name} final log")).at_entry(entries.len())],
                ));
            }
        }

        is_prefix
    }

    /// Each value at most once in a log, each written by a client, none that certainly failed:
    /// duplicated and phantom values. A log that is a prefix of the longest has exactly the
    /// longest's issues below its length, so the longest is scanned once, not every log.
    /// Returns the longest log's issues.
    fn entry_violations(
        &self,
        is_prefix: &[bool],
        fates: &FastMap<&'a str, Fate<'a>>,
        listed: &mut Listed<'a>,
        violations: &mut Vec<KindedItem>,
    ) -> Vec<(usize, EntryIssue<'a>)> {
        let Logs {
            d,
            readable,
            longest,
            ..
        } = self;
        let (d, longest) = (*d, *longest);
        let longest_issues = entry_issues(longest, fates);
        for ((l, entries), prefix) in readable.iter().zip(is_prefix) {
            let name = d.name(l.node);
            let own;
            let issues: &[(usize, EntryIssue)] = if *prefix {
                let below = longest_issues.partition_point(|(i, _)| *i < entries.len());
                &longest_issues[..below]
            } else {
                own = entry_issues(entries, fates);
                &own
            };
            for (i, issue) in issues {
                let (zxid, v) = (entries[*i].0, entries[*i].1.as_str());
                let here = EvRef::new(l.pos, format!("{name} final log")).at_entry(*i);
                match issue {
                    EntryIssue::Twice(first) => {
                        listed.duplicated.insert(v);
                        violations.push((Kind::Duplicated, (
                            format!("Duplicated write: {v} is in {name}'s final log twice (zxids {first:#x} and {zxid:#x})."),
                            vec![here],
                        )));
                    }
                    EntryIssue::Unwritten => {
                        listed.phantom.insert(v);
                        violations.push((Kind::Phantom, (
                            format!("Phantom write: {v} is in {name}'s final log (zxid {zxid:#x}) but no client wrote it."),
                            vec![here],
                        )));
                    }
                    EntryIssue::Failed(f) => {
                        listed.phantom.insert(v);
                        violations.push((Kind::Phantom, (
                            format!("Phantom write: {v} failed (certainly not applied) yet is in {name}'s final log (zxid {zxid:#x})."),
                            vec![EvRef::new(f.pos, format!("write of {v} failed")), here],
                        )));
                    }
                }
            }
        }
        longest_issues
    }

    /// Every acknowledged write is in the final leader's log and a majority's, at its
    /// acknowledged zxid: lost writes (naming who holds one the majority lacks) and moved ones.
    /// Returns how many writes were acknowledged.
    fn ack_violations(
        &self,
        (is_prefix, longest_issues): (&[bool], &[(usize, EntryIssue<'a>)]),
        fates: &FastMap<&'a str, Fate<'a>>,
        (final_leader, quorum, observers): (Option<ReadLog<'a>>, usize, &[String]),
        listed: &mut Listed<'a>,
        violations: &mut Vec<KindedItem>,
    ) -> usize {
        let Logs {
            d,
            readable,
            longest_log,
            longest,
            lname,
        } = self;
        let (d, longest_log, longest, lname) = (*d, *longest_log, *longest, *lname);
        // Quorums are of voters: an observer holding or lacking a write proves nothing.
        let voter = |l: &FinalLog| !observers.iter().any(|o| o == d.name(l.node));
        let mut in_longest = Lookup::new(longest, longest_issues);
        let mut holders_of: Option<FastMap<&str, Vec<Holder>>> = None;
        let mut acked = 0usize;
        let mut acks: Vec<(&str, &WriteOp)> = fates
            .iter()
            .filter_map(|(v, f)| f.ok.map(|ok| (*v, ok)))
            .collect();
        acks.sort_by_key(|a| a.1.pos);
        for (v, ok) in acks {
            acked += 1;
            let at = in_longest.find(v, ok.zxid);
            // Logs are prefixes of the longest (else a divergence above): a log lacks the entry at
            // index i when it is no longer than i.
            let lacks = |e: &Vec<(u64, String)>| at.is_none_or(|(i, _)| e.len() <= i);
            let n_lacking = readable
                .iter()
                .filter(|(l, e)| voter(l) && lacks(e))
                .count();
            let leader_lacks = final_leader.filter(|(_, e)| lacks(e));
            let proof = || vec![EvRef::new(ok.pos, format!("write of {v} acknowledged"))];
            match (at, ok.zxid) {
                (None, _) => {
                    let mut proof = proof();
                    proof.push(EvRef::new(
                        longest_log.pos,
                        format!("{lname} final log (the longest)"),
                    ));
                    // A diverged log may still hold it: name who, so nobody reads "lost
                    // everywhere" where one server kept it. Held by a quorum, it is not lost: the
                    // longest log is the diverged one, and its divergence is reported above.
                    let holders =
                        holders_of.get_or_insert_with(|| holders_map(readable, is_prefix));
                    let holders = holders.get(v).map(Vec::as_slice).unwrap_or_default();
                    if holders.iter().filter(|(l, _, _)| voter(l)).count() >= quorum {
                        continue;
                    }
                    listed.lost.insert(v);
                    let text = if holders.is_empty() {
                        format!("Lost write: {v} was acknowledged but is in no final log.")
                    } else {
                        let who: Vec<String> = holders
                            .iter()
                            .map(|(l, _, z)| format!("{} (zxid {z:#x})", d.name(l.node)))
                            .collect();
                        for (l, i, _) in holders {
                            proof.push(
                                EvRef::new(l.pos, format!("{} final log", d.name(l.node)))
                                    .at_entry(*i),
                            );
                        }
                        format!(
                            "Lost write: {v} was acknowledged but is in no final log of the majority: only {} {} it.",
                            who.join(", "),
                            if holders.len() == 1 { "holds" } else { "hold" }
                        )
                    };
                    violations.push((Kind::Lost, (text, proof)));
                }
                (Some((i, _)), _) if leader_lacks.is_some() || n_lacking >= quorum => {
                    listed.lost.insert(v);
                    let whose = match leader_lacks {
                        Some((l, _)) => format!("the final leader {}'s log", d.name(l.node)),
                        None => format!("{n_lacking} of the voters' final logs, a majority"),
                    };
                    let mut proof = proof();
                    for (l, _) in readable.iter().filter(|(_, e)| lacks(e)).take(2) {
                        proof.push(EvRef::new(l.pos, format!("{} final log", d.name(l.node))));
                    }
                    proof.push(
                        EvRef::new(longest_log.pos, format!("{lname} final log")).at_entry(i),
                    );
                    violations.push((Kind::Lost, (
                        format!("Lost write: {v} was acknowledged but is missing from {whose} (it is entry {i} of {lname}'s): a committed write is never missing from the leader or a quorum."),
                        proof,
                    )));
                }
                (Some((i, at)), Some(z)) if at != z => {
                    let mut proof = proof();
                    proof.push(
                        EvRef::new(longest_log.pos, format!("{lname} final log")).at_entry(i),
                    );
                    violations.push((Kind::Moved, (
                        format!("{v} was acknowledged at zxid {z:#x} but is at zxid {at:#x} in {lname}'s final log."),
                        proof,
                    )));
                }
                _ => {}
            }
        }
        acked
    }
}

/// Where a value is in the longest log: found by its acknowledged zxid when the log is sorted
/// by zxid and holds no value twice, as is usual, else by value in a table built only then.
struct Lookup<'l> {
    longest: &'l [(u64, String)],
    by_zxid: bool,
    by_value: Option<FastMap<&'l str, (usize, u64)>>,
}

impl<'l> Lookup<'l> {
    fn new(longest: &'l [(u64, String)], issues: &[(usize, EntryIssue<'_>)]) -> Self {
        let by_zxid = longest.windows(2).all(|w| w[0].0 < w[1].0)
            && !issues
                .iter()
                .any(|(_, x)| matches!(x, EntryIssue::Twice(_)));
        Lookup {
            longest,
            by_zxid,
            by_value: None,
        }
    }

    /// Value `v`'s (index, zxid) in the longest log; `zxid` is where it was acknowledged.
    fn find(&mut self, v: &str, zxid: Option<u64>) -> Option<(usize, u64)> {
        let longest = self.longest;
        if let (true, Some(z)) = (self.by_zxid, zxid) {
            if let Ok(i) = longest.binary_search_by_key(&z, |e| e.0) {
                if longest[i].1 == v {
                    return Some((i, z));
                }
            }
        }
        self.by_value
            .get_or_insert_with(|| {
                longest
                    .iter()
                    .enumerate()
                    .map(|(i, (z, v))| (v.as_str(), (i, *z)))
                    .collect()
            })
            .get(v)
            .copied()
    }
}

/// Where a value sits in a log other than the longest: the log, the entry, its zxid.
type Holder<'a> = (&'a FinalLog, usize, u64);

/// Each value of the logs that are no prefix of the longest (only they can hold a value the
/// longest lacks), with where it is: built once, when the first write missing from the longest
/// asks, so a run that lost many writes costs one pass over those logs, not one per write.
fn holders_map<'a>(
    readable: &[(&'a FinalLog, &'a Vec<(u64, String)>)],
    is_prefix: &[bool],
) -> FastMap<&'a str, Vec<Holder<'a>>> {
    let mut map: FastMap<&str, Vec<Holder>> = FastMap::default();
    for ((l, entries), prefix) in readable.iter().zip(is_prefix) {
        if *prefix {
            continue;
        }
        for (i, (z, v)) in entries.iter().enumerate() {
            map.entry(v.as_str()).or_default().push((*l, i, *z));
        }
    }
    map
}

/// What durability measured; lost, duplicated and phantom values as JSON text (first 100).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DurabilityMeasurements {
    pub write_events: usize,
    pub invoked: usize,
    pub acknowledged: usize,
    pub final_log_entries: usize,
    pub lost: Vec<String>,
    pub duplicated: Vec<String>,
    pub phantom: Vec<String>,
}

/// At most 100 values, as JSON text: enough to see the pattern without flooding results.json.
fn cap(values: &BTreeSet<&str>) -> Vec<String> {
    values.iter().take(100).map(|v| v.to_string()).collect()
}

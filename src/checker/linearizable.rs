//! linearizable (register workload): the keys' writes (create, set, cas) and the reads done
//! after a `sync` behave as one versioned register per key, each operation taking effect at one
//! instant between its invocation and its completion. Each key is checked alone (a history is
//! linearizable when each key's is: Herlihy and Wing's locality) by an exact search
//! (`search`). A failed operation certainly did not happen and is left out; one whose outcome
//! is unknown (`info`, or never completed) may have taken effect at any time after its
//! invocation, or never.
//!
//! What it does not judge: plain reads (without `sync`), for which ZooKeeper promises only
//! sequential consistency (`session-order` judges those); a read whose outcome is unknown
//! (it changed nothing). A key whose search exceeds the budget is unknown, with the reason.
//! For an invalid key it gives the window the report draws (`Window`): the last operations of
//! the longest order found, the one that cannot follow them and those that overlap it.

pub mod search;

use super::finding::{EvRef, Finding, Item, KindedItem};
use super::kind::Kind;
use super::model::{Digest, RegisterOp};
use super::CheckOptions;
use crate::duration::moment;
use crate::history::test_info::TestInfo;
use crate::history::{EventType, F};
use search::{Action, Blocked, Budget, Op, State, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

pub const NAME: &str = "linearizable";

/// The states a key's search may keep (`--linearizable-budget`): about 32 MiB of cache at
/// most, and a few seconds; keys are searched one after another.
pub const DEFAULT_STATES: u64 = 1_000_000;

/// What linearizable judged, and the windows of its invalid keys (the report draws them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinearizableMeasurements {
    /// Operations the search took (writes and sync reads, failed ones and unknown reads left out).
    pub linearized_ops: usize,
    pub keys: usize,
    /// Keys whose search ran out of budget.
    pub keys_unknown: Vec<String>,
    /// (set, state) pairs the searches kept, all keys together.
    pub states_explored: u64,
    /// One per invalid key.
    pub windows: Vec<Window>,
}

/// The smallest part of a key's history that cannot be linearized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub key: String,
    /// What the ordered operations left: the state the impossible one met.
    pub state: State,
    /// How many of the key's operations the longest order found placed, of `of`.
    pub ordered: usize,
    pub of: usize,
    /// In invocation order.
    pub ops: Vec<WindowOp>,
}

/// One operation of a window: a lane's bar from `invoke_ns` to `complete_ns`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowOp {
    pub role: Role,
    /// The client (its session).
    pub process: String,
    pub node: Option<String>,
    /// `read`, `set`, `cas` or `create`.
    pub f: String,
    /// `ok`, `info`, or `invoke` when it never completed.
    pub outcome: String,
    pub invoke_ns: u64,
    pub complete_ns: Option<u64>,
    /// The history positions of its invoke and completion.
    pub invoke_pos: u32,
    pub complete_pos: Option<u32>,
    /// Written, or read (None: no such key, or unknown).
    pub value: Option<i64>,
    pub expect: Option<i64>,
    /// Left by a write, or read; None when unknown.
    pub version: Option<i64>,
}

/// An operation's part in a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// One of the last operations of the longest order found.
    Ordered,
    /// The operation that cannot follow them.
    Impossible,
    /// An operation overlapping the impossible one (which no order could use to save it).
    Concurrent,
}

/// A register operation: its invoke and, when it completed, its completion.
#[derive(Debug, Clone, Copy)]
pub struct Paired<'a> {
    pub invoke: &'a RegisterOp,
    pub done: Option<&'a RegisterOp>,
}

impl Paired<'_> {
    pub fn outcome(&self) -> EventType {
        self.done.map_or(EventType::Invoke, |d| d.kind)
    }
}

/// Each invocation with its process's next completion, in invocation order. A completion with
/// no invocation before it is left out.
pub fn paired(d: &Digest) -> Vec<Paired<'_>> {
    let mut all: Vec<Paired> = Vec::new();
    let mut open: HashMap<&str, usize> = HashMap::new();
    for op in d.register_ops() {
        match op.kind {
            EventType::Invoke => {
                open.insert(&op.process, all.len());
                all.push(Paired {
                    invoke: op,
                    done: None,
                });
            }
            _ => {
                if let Some(i) = open.remove(op.process.as_str()) {
                    all[i].done = Some(op);
                }
            }
        }
    }
    all
}

/// The operation as the search takes it; None when it is not judged here (failed, a plain
/// read, a read of unknown outcome, or fields the register table requires are missing).
fn as_op(p: &Paired) -> Option<Op> {
    let v = &p.invoke.value;
    let action = match p.invoke.f {
        F::Create => Action::Create(v.value?),
        F::Set => Action::Set(v.value?),
        F::Cas => Action::Cas {
            expect: v.expect?,
            value: v.value?,
        },
        F::Read if v.sync => Action::Read,
        _ => return None,
    };
    let ok = p.done.filter(|d| d.kind == EventType::Ok);
    let seen = match (action, ok) {
        (Action::Read, Some(d)) => Some(State {
            value: d.value.value,
            version: d.value.version?,
        }),
        (Action::Read, None) => return None,
        (_, Some(d)) => d.value.version.map(|version| State {
            value: v.value,
            version,
        }),
        (_, None) => None,
    };
    match p.outcome() {
        EventType::Fail => None,
        _ => Some(Op {
            action,
            seen,
            call: (p.invoke.time, p.invoke.pos),
            ret: ok.map(|d| (d.time, d.pos)),
        }),
    }
}

/// One key's judged operations: the search's and the history's.
struct KeyHistory<'a> {
    ops: Vec<Op>,
    paired: Vec<Paired<'a>>,
}

fn by_key<'a>(all: &[Paired<'a>]) -> BTreeMap<&'a str, KeyHistory<'a>> {
    let mut keys: BTreeMap<&str, KeyHistory> = BTreeMap::new();
    for p in all {
        let Some(op) = as_op(p) else { continue };
        let k = keys
            .entry(p.invoke.value.key.as_str())
            .or_insert(KeyHistory {
                ops: Vec::new(),
                paired: Vec::new(),
            });
        k.ops.push(op);
        k.paired.push(*p);
    }
    keys
}

pub fn check(d: &Digest, info: &TestInfo, opts: &CheckOptions) -> Finding {
    let all = paired(d);
    let mut gaps: Vec<Item> = bad_values(d);
    if all.is_empty() {
        let why = format!(
            "The history has no register operations (workload \"{}\"), so {NAME} cannot be judged.",
            info.workload
        );
        gaps.push((why, vec![]));
    }
    let budget = Budget::of_states(opts.linearizable_states.unwrap_or(DEFAULT_STATES));
    let keys = by_key(&all);
    let mut violations: Vec<KindedItem> = Vec::new();
    let mut m = LinearizableMeasurements {
        linearized_ops: keys.values().map(|k| k.ops.len()).sum(),
        keys: keys.len(),
        keys_unknown: Vec::new(),
        states_explored: 0,
        windows: Vec::new(),
    };
    for (key, h) in &keys {
        match search::search(&h.ops, budget) {
            Verdict::Linearizable { states } => m.states_explored += states,
            Verdict::NotLinearizable(b) => {
                m.states_explored += b.states;
                let (window, item) = explain(key, h, &b, &d.nodes);
                m.windows.push(window);
                violations.push((Kind::NotLinearizable, item));
            }
            Verdict::GaveUp {
                states,
                steps,
                depth,
            } => {
                m.states_explored += states;
                m.keys_unknown.push(key.to_string());
                let why = format!(
                    "Key {key}: the search gave up after {states} states and {steps} steps (budget: --linearizable-budget {}), having ordered {depth} of its {} operations: not judged.",
                    budget.states,
                    h.ops.len()
                );
                gaps.push((why, vec![]));
            }
        }
    }
    let ok = format!(
        "Each of the {} keys' histories ({} writes and sync reads) is linearizable as a versioned register.",
        m.keys, m.linearized_ops
    );
    Finding::judge_kinds(violations, gaps, ok)
        .with_measurements(super::Measurements::Linearizable(Box::new(m)))
}

/// Register values the digest could not read: nothing is judged around them.
pub(crate) fn bad_values(d: &Digest) -> Vec<Item> {
    (d.bad_register_values.iter())
        .map(|(pos, why)| {
            let text =
                format!("History event {pos}: {why}; the key it names is judged without it.");
            (text, vec![EvRef::new(*pos, "an unreadable register value")])
        })
        .collect()
}

/// A register operation's `f` as the history writes it.
pub(crate) fn f_name(f: F) -> &'static str {
    match f {
        F::Read => "read",
        F::Set => "set",
        F::Cas => "cas",
        F::Create => "create",
        _ => "other",
    }
}

/// "read of k1 on n3 by client 4 at 12.300 s".
pub(crate) fn describe(op: &RegisterOp, nodes: &[String]) -> String {
    let node = op
        .node
        .map_or(String::new(), |n| format!(" on {}", nodes[n as usize]));
    let f = f_name(op.f);
    let key = &op.value.key;
    let (by, at) = (&op.process, moment(op.time));
    format!("{f} of {key}{node} by client {by} at {at}")
}

/// What an operation showed: "returned 17 (version 4)", "writing 6 (expecting version 0) was
/// acknowledged at version 1".
fn showed(p: &Paired) -> String {
    let v = |value: Option<i64>| value.map_or("no value".to_string(), |x| x.to_string());
    let ok = p.done.filter(|d| d.kind == EventType::Ok);
    let version = ok.and_then(|d| d.value.version);
    let acked = version.map_or(String::new(), |n| {
        format!(" was acknowledged at version {n}")
    });
    let (written, expect) = (v(p.invoke.value.value), p.invoke.value.expect);
    match (p.invoke.f, ok) {
        (F::Read, Some(d)) => {
            let at = version.map_or(String::new(), |n| format!(" (version {n})"));
            format!("returned {}{at}", v(d.value.value))
        }
        (F::Cas, _) => format!("writing {written} (expecting version {}){acked}", v(expect)),
        _ => format!("writing {written}{acked}"),
    }
}

/// A write in a sentence: "set 21 (version 5) by client 2 on n1".
fn write_label(p: &Paired, nodes: &[String]) -> String {
    let v = p
        .invoke
        .value
        .value
        .map_or("?".to_string(), |x| x.to_string());
    let ok = p.done.filter(|d| d.kind == EventType::Ok);
    let version = ok.and_then(|d| d.value.version);
    let version = version.map_or(String::new(), |n| format!(" (version {n})"));
    let node = (p.done.unwrap_or(p.invoke).node)
        .map_or(String::new(), |n| format!(" on {}", nodes[n as usize]));
    let (f, by) = (f_name(p.invoke.f), &p.invoke.process);
    format!("{f} {v}{version} by client {by}{node}")
}

fn state_words(s: State) -> String {
    match s.value {
        None => "no such key".to_string(),
        Some(v) => format!("{v} (version {})", s.version),
    }
}

/// The window and the account of an invalid key.
fn explain(key: &str, h: &KeyHistory, b: &Blocked, nodes: &[String]) -> (Window, Item) {
    let imp = h.paired[b.op];
    let (call, ret) = (h.ops[b.op].call, h.ops[b.op].ret);
    let overlaps = |o: &Op| o.call < ret.unwrap_or((u64::MAX, 0)) && o.ret.is_none_or(|r| r > call);
    let concurrent: Vec<usize> = (0..h.ops.len())
        .filter(|&i| i != b.op && !b.tail.contains(&i) && overlaps(&h.ops[i]))
        .take(8)
        .collect();
    let mut roles: Vec<(usize, Role)> = (b.tail.iter().map(|&i| (i, Role::Ordered)))
        .chain([(b.op, Role::Impossible)])
        .chain(concurrent.iter().map(|&i| (i, Role::Concurrent)))
        .collect();
    roles.sort_by_key(|(i, _)| h.ops[*i].call);
    let window = Window {
        key: key.to_string(),
        state: b.state,
        ordered: b.depth,
        of: h.ops.len(),
        ops: roles
            .iter()
            .map(|&(i, role)| window_op(&h.paired[i], role, nodes))
            .collect(),
    };
    let writer = (b.tail.iter().rev()).find(|&&i| h.paired[i].invoke.f != F::Read);
    let mut text = format!(
        "{} {}, but the key held {}",
        describe(imp.invoke, nodes),
        showed(&imp),
        state_words(b.state)
    );
    let mut evidence = vec![EvRef::new(
        imp.invoke.pos,
        "the operation no order allows: its invoke",
    )];
    if let Some(d) = imp.done {
        evidence.push(EvRef::new(d.pos, "its completion"));
    }
    if let Some(&w) = writer {
        let wp = h.paired[w];
        let when = match (h.ops[w].ret, wp.done) {
            (Some(r), Some(d)) if r < call => {
                format!("had completed at {}, before it began", moment(d.time))
            }
            (_, Some(d)) => format!("completed at {}, while it ran", moment(d.time)),
            _ => format!(
                "was invoked at {}, its outcome unknown",
                moment(wp.invoke.time)
            ),
        };
        text += &format!(" after {} {when}", write_label(&wp, nodes));
        let at = wp.done.map_or(wp.invoke.pos, |d| d.pos);
        evidence.push(EvRef::new(at, "the write the ordered operations end with"));
    }
    text += &format!(
        ". The longest order found placed {} of the key's {} operations",
        b.depth,
        h.ops.len()
    );
    text += &match concurrent.len() {
        0 => ".".to_string(),
        n => format!("; no order of the {n} overlapping it allows it."),
    };
    for &i in concurrent.iter().take(3) {
        let p = h.paired[i];
        let at = p.done.map_or(p.invoke.pos, |d| d.pos);
        evidence.push(EvRef::new(at, "an operation overlapping it"));
    }
    (window, (text, evidence))
}

fn window_op(p: &Paired, role: Role, nodes: &[String]) -> WindowOp {
    let ok = p.done.filter(|d| d.kind == EventType::Ok);
    let value = match p.invoke.f {
        F::Read => ok.and_then(|d| d.value.value),
        _ => p.invoke.value.value,
    };
    WindowOp {
        role,
        process: p.invoke.process.clone(),
        node: (p.done.unwrap_or(p.invoke).node).map(|n| nodes[n as usize].clone()),
        f: f_name(p.invoke.f).to_string(),
        outcome: p.outcome().name().to_string(),
        invoke_ns: p.invoke.time,
        complete_ns: p.done.map(|d| d.time),
        invoke_pos: p.invoke.pos,
        complete_pos: p.done.map(|d| d.pos),
        value,
        expect: p.invoke.value.expect,
        version: ok.and_then(|d| d.value.version),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::model::digest_lines;
    use crate::checker::Validity;

    fn line(i: usize, ms: u64, process: &str, kind: &str, f: &str, value: &str) -> String {
        format!(
            r#"{{"index":{i},"time":{},"process":"{process}","type":"{kind}","f":"{f}","node":"n1","value":{value}}}"#,
            ms * 1_000_000
        )
    }

    fn judge(lines: &[(u64, &str, &str, &str, &str)], states: Option<u64>) -> Finding {
        let texts: Vec<String> = (lines.iter().enumerate())
            .map(|(i, (ms, p, k, f, v))| line(i, *ms, p, k, f, v))
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let d = digest_lines(&refs, &["n1".to_string()]).unwrap();
        let mut info = TestInfo::for_tests(&["n1"]);
        info.workload = "register".into();
        let opts = CheckOptions {
            linearizable_states: states,
            ..Default::default()
        };
        check(&d, &info, &opts)
    }

    #[test]
    fn a_stale_sync_read_is_named_with_its_window() {
        let f = judge(
            &[
                (1, "0", "invoke", "create", r#"{"key":"k1","value":1}"#),
                (
                    2,
                    "0",
                    "ok",
                    "create",
                    r#"{"key":"k1","value":1,"version":0}"#,
                ),
                (3, "0", "invoke", "set", r#"{"key":"k1","value":2}"#),
                (4, "0", "ok", "set", r#"{"key":"k1","value":2,"version":1}"#),
                (5, "1", "invoke", "read", r#"{"key":"k1","sync":true}"#),
                (
                    6,
                    "1",
                    "ok",
                    "read",
                    r#"{"key":"k1","sync":true,"value":1,"version":0}"#,
                ),
                // A plain read may be stale: not judged here.
                (7, "2", "invoke", "read", r#"{"key":"k1"}"#),
                (
                    8,
                    "2",
                    "ok",
                    "read",
                    r#"{"key":"k1","value":1,"version":0}"#,
                ),
            ],
            None,
        );
        assert_eq!(f.valid, Validity::False, "{}", f.explanation);
        assert!(f.explanation.starts_with("read of k1 on n1 by client 1 at 0.005 s returned 1 (version 0), but the key held 2 (version 1) after set 2 (version 1) by client 0 on n1 had completed at 0.004 s, before it began."), "{}", f.explanation);
        let crate::checker::Measurements::Linearizable(m) = f.measurements else {
            panic!("measurements")
        };
        let w = &m.windows[0];
        let roles: Vec<Role> = w.ops.iter().map(|o| o.role).collect();
        assert_eq!(roles, [Role::Ordered, Role::Ordered, Role::Impossible]);
        assert_eq!((w.ordered, w.of, w.ops[2].invoke_pos), (2, 3, 4));
    }

    #[test]
    fn a_search_over_budget_is_unknown_with_the_reason() {
        let mut lines = vec![
            (
                1,
                "0",
                "invoke",
                "create",
                r#"{"key":"k1","value":0}"#.to_string(),
            ),
            (
                2,
                "0",
                "ok",
                "create",
                r#"{"key":"k1","value":0,"version":0}"#.to_string(),
            ),
        ];
        for i in 1..=40u64 {
            let v = format!(r#"{{"key":"k1","value":{i}}}"#);
            lines.push((2 + i, "x", "invoke", "set", v));
        }
        lines.push((
            50,
            "y",
            "invoke",
            "read",
            r#"{"key":"k1","sync":true}"#.into(),
        ));
        let read = r#"{"key":"k1","sync":true,"value":99,"version":3}"#.to_string();
        lines.push((51, "y", "ok", "read", read));
        // Each unknown set is its own process (one never reused after an info).
        let named: Vec<(u64, String, &str, &str, String)> = (lines.into_iter())
            .map(|(ms, p, k, f, v)| {
                let p = if p == "x" {
                    format!("s{ms}")
                } else {
                    p.to_string()
                };
                (ms, p, k, f, v)
            })
            .collect();
        let borrowed: Vec<(u64, &str, &str, &str, &str)> = (named.iter())
            .map(|(ms, p, k, f, v)| (*ms, p.as_str(), *k, *f, v.as_str()))
            .collect();
        let f = judge(&borrowed, Some(500));
        assert_eq!(f.valid, Validity::Unknown, "{}", f.explanation);
        assert!(f.explanation.contains("gave up"), "{}", f.explanation);
        assert_eq!(judge(&borrowed, None).valid, Validity::False);
    }
}

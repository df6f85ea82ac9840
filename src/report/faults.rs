//! The nemesis as the report sees it: the schedule (every action, done or not) and the
//! intervals during which each fault was in force, for shading plots and the recovery plot.
//!
//! A fault starts with `kill`, `pause`, `partition` or a non-reset `clock` that the nemesis
//! completed (`info`), and ends when the matching undo (`start`, `resume`, `heal`, a `clock`
//! with `"mode": "reset"`) covers its nodes; an undo without nodes undoes every fault of its kind.

use crate::history::{Event, EventType, F};
use serde_json::Value;

pub use crate::nemesis::schedule::FaultKind;

/// One fault in force from `start_ns` to `end_ns` (the run's end if never undone).
#[derive(Debug, Clone, PartialEq)]
pub struct FaultInterval {
    pub kind: FaultKind,
    pub nodes: Vec<String>,
    pub start_ns: u64,
    pub end_ns: u64,
    /// False when the run ended with the fault still in force.
    pub healed: bool,
}

/// One completed nemesis action, for the schedule table.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleRow {
    pub invoke_ns: Option<u64>,
    pub done_ns: u64,
    pub f: F,
    pub outcome: EventType,
    pub nodes: Vec<String>,
    /// The action's value as compact JSON, shortened for the table.
    pub detail: String,
}

/// Builds the schedule and the fault intervals from nemesis events, in history order.
#[derive(Debug, Default)]
pub struct FaultTracker {
    pending_invoke: Option<(F, u64)>,
    /// Faults in force, each with the nodes not yet undone.
    open: Vec<(FaultInterval, Vec<String>)>,
    pub closed: Vec<FaultInterval>,
    pub schedule: Vec<ScheduleRow>,
    /// Active partition drops: (node, peer it drops traffic from).
    pub drops: Vec<(String, String)>,
}

/// What one nemesis completion did to the set of faults in force.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultChange {
    None,
    Started(FaultKind, Vec<String>),
    Ended,
}

const DETAIL_CHARS: usize = 160;

impl FaultTracker {
    pub fn is_nemesis_f(f: F) -> bool {
        matches!(
            f,
            F::Kill | F::Start | F::Pause | F::Resume | F::Partition | F::Heal | F::Clock
        )
    }

    pub fn observe(&mut self, e: &Event) -> FaultChange {
        if e.kind == EventType::Invoke {
            self.pending_invoke = Some((e.f, e.time));
            return FaultChange::None;
        }
        let invoke_ns = match self.pending_invoke.take() {
            Some((f, t)) if f == e.f => Some(t),
            _ => None,
        };
        let nodes = nodes_of(&e.value);
        let mut detail = e.value.to_string();
        if detail.len() > DETAIL_CHARS {
            let cut = (0..=DETAIL_CHARS)
                .rev()
                .find(|&i| detail.is_char_boundary(i))
                .unwrap_or(0);
            detail.truncate(cut);
            detail.push('…');
        }
        self.schedule.push(ScheduleRow {
            invoke_ns,
            done_ns: e.time,
            f: e.f,
            outcome: e.kind,
            nodes: nodes.clone(),
            detail,
        });
        if e.kind != EventType::Info {
            return FaultChange::None;
        }
        let start = invoke_ns.unwrap_or(e.time);
        match (e.f, is_clock_reset(&e.value)) {
            (F::Kill, _) => self.start(FaultKind::Kill, nodes, start),
            (F::PowerLoss, _) => self.start(FaultKind::PowerLoss, nodes, start),
            (F::Corrupt, _) => self.start(FaultKind::Corrupt, nodes, start),
            (F::Start, _) if e.value.get("undoes").and_then(|u| u.as_str()) == Some("corrupt") => {
                self.end(FaultKind::Corrupt, &nodes, e.time)
            }
            (F::Start, _)
                if e.value.get("undoes").and_then(|u| u.as_str()) == Some("power-loss") =>
            {
                self.end(FaultKind::PowerLoss, &nodes, e.time)
            }
            (F::Pause, _) => self.start(FaultKind::Pause, nodes, start),
            (F::Clock, false) => self.start(FaultKind::Clock, nodes, start),
            (F::Partition, _) => {
                self.drops.extend(drops_of(&e.value));
                self.start(FaultKind::Partition, nodes, start)
            }
            (F::Start, _) => self.end(FaultKind::Kill, &nodes, e.time),
            (F::Resume, _) => self.end(FaultKind::Pause, &nodes, e.time),
            (F::Clock, true) => self.end(FaultKind::Clock, &nodes, e.time),
            (F::Heal, _) => {
                self.drops.clear();
                self.end(FaultKind::Partition, &[], e.time)
            }
            _ => FaultChange::None,
        }
    }

    fn start(&mut self, kind: FaultKind, nodes: Vec<String>, at: u64) -> FaultChange {
        let interval = FaultInterval {
            kind,
            nodes: nodes.clone(),
            start_ns: at,
            end_ns: at,
            healed: false,
        };
        self.open.push((interval, nodes.clone()));
        FaultChange::Started(kind, nodes)
    }

    fn end(&mut self, kind: FaultKind, nodes: &[String], at: u64) -> FaultChange {
        for (f, remaining) in self.open.iter_mut().filter(|(f, _)| f.kind == kind) {
            if nodes.is_empty() {
                remaining.clear();
            } else {
                remaining.retain(|n| !nodes.contains(n));
            }
            if remaining.is_empty() {
                f.end_ns = at;
                f.healed = true;
            }
        }
        let (done, open): (Vec<_>, Vec<_>) = std::mem::take(&mut self.open)
            .into_iter()
            .partition(|(f, _)| f.healed);
        self.open = open;
        self.closed.extend(done.into_iter().map(|(f, _)| f));
        FaultChange::Ended
    }

    /// Every interval, closing the ones still open at `t_end_ns`; sorted by start.
    pub fn finish(mut self, t_end_ns: u64) -> (Vec<FaultInterval>, Vec<ScheduleRow>) {
        for (mut f, _) in self.open.drain(..) {
            f.end_ns = t_end_ns.max(f.start_ns);
            self.closed.push(f);
        }
        self.closed.sort_by_key(|f| f.start_ns);
        (self.closed, self.schedule)
    }

    /// True when `a` and `b` can talk: neither drops the other's traffic.
    pub fn connected(&self, a: &str, b: &str) -> bool {
        !self
            .drops
            .iter()
            .any(|(x, y)| (x == a && y == b) || (x == b && y == a))
    }
}

fn nodes_of(value: &Value) -> Vec<String> {
    match value.get("nodes") {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => value
            .get("node")
            .and_then(Value::as_str)
            .map(|s| vec![s.to_string()])
            .unwrap_or_default(),
    }
}

fn is_clock_reset(value: &Value) -> bool {
    value.get("mode").and_then(Value::as_str) == Some("reset")
}

fn drops_of(value: &Value) -> Vec<(String, String)> {
    let Some(Value::Object(map)) = value.get("drops") else {
        return Vec::new();
    };
    map.iter()
        .flat_map(|(node, peers)| {
            peers
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p.as_str())
                .map(move |p| (node.clone(), p.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(time: u64, kind: EventType, f: F, value: Value) -> Event {
        Event {
            index: 0,
            time,
            process: "nemesis".into(),
            kind,
            f,
            node: None,
            value,
        }
    }

    #[test]
    fn kill_of_two_nodes_ends_when_both_are_started() {
        let mut t = FaultTracker::default();
        let nodes = json!({"nodes": ["n1", "n2"]});
        t.observe(&ev(10, EventType::Invoke, F::Kill, nodes.clone()));
        let c = t.observe(&ev(12, EventType::Info, F::Kill, nodes));
        assert_eq!(
            c,
            FaultChange::Started(FaultKind::Kill, vec!["n1".into(), "n2".into()])
        );
        t.observe(&ev(20, EventType::Info, F::Start, json!({"nodes": ["n1"]})));
        assert!(t.closed.is_empty());
        t.observe(&ev(30, EventType::Info, F::Start, json!({"nodes": ["n2"]})));
        let (intervals, schedule) = t.finish(100);
        assert_eq!(intervals.len(), 1);
        assert_eq!(
            (
                intervals[0].start_ns,
                intervals[0].end_ns,
                intervals[0].healed
            ),
            (10, 30, true)
        );
        assert_eq!(intervals[0].nodes, vec!["n1", "n2"]);
        assert_eq!(schedule.len(), 3);
    }

    #[test]
    fn failed_faults_do_not_shade_and_open_faults_run_to_the_end() {
        let mut t = FaultTracker::default();
        t.observe(&ev(1, EventType::Fail, F::Pause, json!({"nodes": ["n3"]})));
        t.observe(&ev(
            5,
            EventType::Info,
            F::Partition,
            json!({"nodes": ["n1"], "drops": {"n1": ["n2"]}}),
        ));
        assert!(!t.connected("n2", "n1"));
        assert!(t.connected("n2", "n3"));
        let (intervals, _) = t.finish(50);
        assert_eq!(intervals.len(), 1);
        assert_eq!(intervals[0].kind, FaultKind::Partition);
        assert_eq!((intervals[0].end_ns, intervals[0].healed), (50, false));
    }

    #[test]
    fn clock_reset_ends_clock_faults() {
        let mut t = FaultTracker::default();
        t.observe(&ev(
            1,
            EventType::Info,
            F::Clock,
            json!({"nodes": ["n2"], "mode": "bump", "delta_ms": -600000}),
        ));
        t.observe(&ev(
            9,
            EventType::Info,
            F::Clock,
            json!({"nodes": ["n2"], "mode": "reset"}),
        ));
        let (intervals, _) = t.finish(50);
        assert_eq!(
            (intervals[0].kind, intervals[0].end_ns),
            (FaultKind::Clock, 9)
        );
    }
}

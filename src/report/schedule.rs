//! The fault schedule table: every nemesis action, done or not, with when it was invoked and
//! completed, on which nodes, and what was done. (When a fault was in force is not decided
//! here: that is `history::view`'s fault intervals.)

use crate::history::line::{Body, Line};
use crate::history::{EventType, F, NEMESIS};

/// One completed nemesis action.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleRow {
    pub invoke_ns: Option<u64>,
    pub done_ns: u64,
    /// The action, as written in the history ("kill", "heal", "power-loss", ...).
    pub action: String,
    pub outcome: EventType,
    pub nodes: Vec<String>,
    /// The action's typed value as compact JSON, shortened for the table.
    pub detail: String,
}

/// Builds the schedule from the history's lines, in order.
#[derive(Debug, Default, Clone)]
pub struct Schedule {
    pending_invoke: Option<(F, u64)>,
    pub rows: Vec<ScheduleRow>,
    /// Whether any nemesis action was seen, and the first row when its line came before any
    /// invocation (read in parts, its invocation may end the part before).
    seen: bool,
    first_unpaired: Option<(usize, F)>,
}

const DETAIL_CHARS: usize = 160;

impl Schedule {
    /// Takes the nemesis's fault actions; every other line is ignored.
    pub fn line(&mut self, l: &Line<'_>) {
        let Body::Fault(value) = &l.body else { return };
        if l.process != NEMESIS {
            return;
        }
        let first = !std::mem::replace(&mut self.seen, true);
        if l.kind == EventType::Invoke {
            self.pending_invoke = Some((l.f, l.time));
            return;
        }
        let invoke_ns = match self.pending_invoke.take() {
            Some((f, t)) if f == l.f => Some(t),
            _ => None,
        };
        if first {
            self.first_unpaired = Some((self.rows.len(), l.f));
        }
        let detail = serde_json::to_string(value).unwrap_or_default();
        self.rows.push(ScheduleRow {
            invoke_ns,
            done_ns: l.time,
            action: l.f_name.to_string(),
            outcome: l.kind,
            nodes: value.nodes.clone(),
            detail: super::text::shorten(&detail, DETAIL_CHARS),
        });
    }
}

impl Schedule {
    /// The schedule of the lines right after these (the next part of a history read in
    /// parts), as if they had been read here.
    pub fn append(&mut self, mut next: Schedule) {
        if let (Some((ix, f)), Some((pf, t))) = (next.first_unpaired, self.pending_invoke) {
            if f == pf {
                next.rows[ix].invoke_ns = Some(t);
            }
        }
        if next.seen {
            self.pending_invoke = next.pending_invoke;
        }
        self.seen |= next.seen;
        self.rows.extend(next.rows);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::line::decode;

    fn feed(s: &mut Schedule, lines: &[&str]) {
        for l in lines {
            s.line(&decode(l).unwrap());
        }
    }

    #[test]
    fn actions_pair_with_their_invocation_and_keep_their_typed_value() {
        let mut s = Schedule::default();
        feed(
            &mut s,
            &[
                r#"{"index":0,"time":10,"process":"nemesis","type":"invoke","f":"kill","value":{"nodes":["n1","n2"]}}"#,
                r#"{"index":1,"time":12,"process":"nemesis","type":"info","f":"kill","value":{"nodes":["n1","n2"],"pids":[7,8]}}"#,
                r#"{"index":2,"time":13,"process":"0","type":"invoke","f":"write","value":{"value":1}}"#,
                r#"{"index":3,"time":20,"process":"nemesis","type":"fail","f":"pause","value":{"nodes":["n3"],"error":"no such process"}}"#,
                r#"{"index":4,"time":30,"process":"nemesis","type":"info","f":"power-loss","value":{"nodes":["n4"]}}"#,
            ],
        );
        let rows: Vec<_> = s
            .rows
            .iter()
            .map(|r| (r.invoke_ns, r.done_ns, r.action.as_str(), r.outcome))
            .collect();
        assert_eq!(
            rows,
            vec![
                (Some(10), 12, "kill", EventType::Info),
                (None, 20, "pause", EventType::Fail),
                (None, 30, "power-loss", EventType::Info),
            ]
        );
        assert_eq!(s.rows[0].nodes, vec!["n1", "n2"]);
        assert!(s.rows[1].detail.contains("no such process"));
    }

    #[test]
    fn an_invocation_that_ends_one_part_pairs_with_the_completion_that_starts_the_next() {
        let lines = [
            r#"{"index":0,"time":10,"process":"nemesis","type":"info","f":"kill","value":{"nodes":["n1"]}}"#,
            r#"{"index":1,"time":20,"process":"nemesis","type":"invoke","f":"pause","value":{"nodes":["n2"]}}"#,
            r#"{"index":2,"time":25,"process":"nemesis","type":"info","f":"pause","value":{"nodes":["n2"]}}"#,
            r#"{"index":3,"time":30,"process":"nemesis","type":"invoke","f":"heal","value":{"nodes":[]}}"#,
        ];
        let mut whole = Schedule::default();
        feed(&mut whole, &lines);
        for cut in 0..=lines.len() {
            let (mut a, mut b) = (Schedule::default(), Schedule::default());
            feed(&mut a, &lines[..cut]);
            feed(&mut b, &lines[cut..]);
            a.append(b);
            assert_eq!(a.rows, whole.rows, "cut before line {cut}");
            assert_eq!(
                a.pending_invoke, whole.pending_invoke,
                "cut before line {cut}"
            );
        }
        assert_eq!(whole.rows[1].invoke_ns, Some(20));
    }
}

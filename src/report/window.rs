//! The smallest window of operations on one key that cannot be linearized, drawn as Jepsen's
//! and Porcupine's reports draw it: one lane per client, a bar from each operation's invoke to
//! its completion (an unknown outcome runs dashed to the window's end), its label on it, and
//! the operation that cannot take effect anywhere marked red. Inline SVG, so the page needs
//! nothing else to show it.

use super::text::escape;
use crate::checker::linearizable::{Role, Window, WindowOp};
use crate::checker::{Measurements, Results};
use std::fmt::Write as _;

/// The report's section: each key the `linearizable` checker found invalid, its window drawn
/// and captioned; empty when there is none.
pub fn section(results: Option<&Results>) -> String {
    let windows: Vec<&Window> = results
        .map(|r| r.checkers.as_slice())
        .unwrap_or_default()
        .iter()
        .filter_map(|c| match &c.measurements {
            Measurements::Linearizable(m) => Some(m.windows.iter()),
            _ => None,
        })
        .flatten()
        .collect();
    if windows.is_empty() {
        return String::new();
    }
    let mut h =
        String::from("<h2 id=\"not-linearizable\">Operations that cannot be linearized</h2>\n");
    for w in windows {
        let bars: Vec<Bar> = w.ops.iter().map(bar_of).collect();
        let state = match w.state.value {
            Some(v) => format!("{v} (version {})", w.state.version),
            None => "no such key".to_string(),
        };
        let _ = writeln!(
            h,
            "<figure>{}<figcaption>Key {}: the longest order found placed {} of its {} operations \
             and left it at {}; the red operation cannot follow them, nor can the operations \
             overlapping it save it. One lane per client, a bar from invoke to completion \
             (dashed: outcome unknown).</figcaption></figure>",
            svg(&w.key, &bars),
            escape(&w.key),
            w.ordered,
            w.of,
            escape(&state)
        );
    }
    h
}

/// A window operation as a bar: "cas 3→17 ok v4", "read ok 17 v4", "set 21 info".
fn bar_of(op: &WindowOp) -> Bar {
    let mut label = op.f.clone();
    match (op.f.as_str(), op.expect, op.value) {
        ("read", _, v) if op.outcome == "ok" => {
            let _ = write!(label, " → {}", v.map_or("none".into(), |v| v.to_string()));
        }
        (_, Some(e), Some(v)) => {
            let _ = write!(label, " v{e}→{v}");
        }
        (_, None, Some(v)) => {
            let _ = write!(label, " {v}");
        }
        _ => {}
    }
    let _ = write!(label, " {}", op.outcome);
    if let (Some(v), "ok") = (op.version, op.outcome.as_str()) {
        let _ = write!(label, " v{v}");
    }
    Bar {
        process: op.process.clone(),
        node: op.node.clone(),
        label,
        start_ns: op.invoke_ns,
        // An unknown outcome may take effect any time after its invoke.
        end_ns: op.complete_ns.filter(|_| op.outcome == "ok"),
        impossible: op.role == Role::Impossible,
    }
}

/// One operation of the window.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// The client (process) that ran it: its lane.
    pub process: String,
    /// The server that served it.
    pub node: Option<String>,
    /// What it did and answered ("cas 3→17 ok v4").
    pub label: String,
    pub start_ns: u64,
    /// None: its outcome is unknown (`info`, or never completed).
    pub end_ns: Option<u64>,
    /// The operation no order of the window can explain.
    pub impossible: bool,
}

const WIDTH: f64 = 1200.0;
const LEFT: f64 = 150.0;
const RIGHT: f64 = 20.0;
const LANE: f64 = 34.0;
const TOP: f64 = 26.0;

/// The window as an SVG element; empty when there is nothing to draw.
pub fn svg(key: &str, bars: &[Bar]) -> String {
    let Some(t0) = bars.iter().map(|b| b.start_ns).min() else {
        return String::new();
    };
    let t1 = bars
        .iter()
        .map(|b| b.end_ns.unwrap_or(b.start_ns).max(b.start_ns))
        .max()
        .unwrap_or(t0);
    // Unknown outcomes run past the last completion by a tenth of the window.
    let span = (t1 - t0).max(1) as f64;
    let end = t1 as f64 + span * 0.1;
    let x = |t: f64| LEFT + (t - t0 as f64) / (end - t0 as f64) * (WIDTH - LEFT - RIGHT);
    let mut lanes: Vec<&str> = bars.iter().map(|b| b.process.as_str()).collect();
    lanes.sort_by_key(|p| (p.parse::<u64>().unwrap_or(u64::MAX), *p));
    lanes.dedup();
    let height = TOP + LANE * lanes.len() as f64 + 24.0;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg class=\"window\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" \
         height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" style=\"max-width:100%;height:auto\" \
         font-family=\"sans-serif\" \
         font-size=\"12\"><title>key {}: operations that cannot be linearized</title>",
        escape(key)
    );
    for (i, lane) in lanes.iter().enumerate() {
        let y = TOP + LANE * i as f64;
        let node = bars
            .iter()
            .find(|b| b.process == *lane)
            .and_then(|b| b.node.as_deref())
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        let _ = write!(
            s,
            "<text x=\"6\" y=\"{:.1}\">client {}{}</text>\
             <line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/>",
            y + 20.0,
            escape(lane),
            escape(&node),
            WIDTH - RIGHT,
            y + LANE - 2.0,
            y + LANE - 2.0
        );
    }
    for b in bars {
        let lane = lanes.iter().position(|l| *l == b.process).unwrap_or(0);
        let y = TOP + LANE * lane as f64 + 4.0;
        let (x0, x1) = (
            x(b.start_ns as f64),
            x(b.end_ns.map(|e| e as f64).unwrap_or(end)),
        );
        let w = (x1 - x0).max(3.0);
        let (fill, stroke) = if b.impossible {
            ("#ffcdd2", "#c62828")
        } else {
            ("#e3f2fd", "#1565c0")
        };
        let dash = if b.end_ns.is_none() {
            " stroke-dasharray=\"5 3\""
        } else {
            ""
        };
        let class = if b.impossible { "op impossible" } else { "op" };
        let _ = write!(
            s,
            "<g class=\"{class}\"><rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"24\" \
             rx=\"3\" fill=\"{fill}\" stroke=\"{stroke}\"{dash}/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}{}</text></g>",
            x0 + 4.0,
            y + 16.0,
            if b.impossible { "✗ " } else { "" },
            escape(&b.label)
        );
    }
    let _ = write!(
        s,
        "<text x=\"{LEFT}\" y=\"{:.1}\" fill=\"#555\">{:.3} s</text>\
         <text x=\"{:.1}\" y=\"{:.1}\" fill=\"#555\" text-anchor=\"end\">{:.3} s</text></svg>",
        height - 6.0,
        t0 as f64 / 1e9,
        WIDTH - RIGHT,
        height - 6.0,
        end / 1e9
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(process: &str, label: &str, start: u64, end: Option<u64>, impossible: bool) -> Bar {
        Bar {
            process: process.into(),
            node: Some("n1".into()),
            label: label.into(),
            start_ns: start,
            end_ns: end,
            impossible,
        }
    }

    #[test]
    fn one_lane_per_client_one_bar_per_op_and_the_impossible_one_marked() {
        let bars = [
            bar("10", "set 21 ok v5", 1_000, Some(2_000), false),
            bar("2", "read 17 v4 <x>", 3_000, Some(4_000), true),
            bar("2", "set 22", 3_500, None, false),
        ];
        let s = svg("k1", &bars);
        assert_eq!(s.matches("<rect").count(), 3);
        assert_eq!(s.matches("class=\"op impossible\"").count(), 1);
        assert_eq!(s.matches("stroke-dasharray").count(), 1, "the unknown one");
        // Lanes in client order, numbers as numbers: 2 before 10.
        let (two, ten) = (s.find("client 2").unwrap(), s.find("client 10").unwrap());
        assert!(two < ten);
        assert!(s.contains("&lt;x&gt;"), "labels are escaped");
        assert!(svg("k1", &[]).is_empty());
    }
}

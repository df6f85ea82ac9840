//! Violations: where on the time axis each invalid checker's evidence lies. Every time plot
//! marks them (a line at each evidence time, in the checker's color), the interactive
//! timeline too, and each invalid checker gets a zoomed plot around its first one.
//! They are read from the typed `checker::Evidence` (its `time_ns` and the event's `index`),
//! nothing else.

use crate::checker::{Results, Validity};
use plotters::style::RGBColor;

/// One evidence event of an invalid checker.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub checker: String,
    pub time_ns: u64,
    /// The quoted event's `index` in the history, when it has one.
    pub index: Option<u64>,
    pub color: RGBColor,
}

/// Hex form of a color, for HTML and hand-written SVG.
pub fn hex(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// Every timed evidence event of every invalid checker, in checker then time order.
pub fn of(results: Option<&Results>) -> Vec<Violation> {
    let mut out = Vec::new();
    for c in results.map(|r| r.checkers.as_slice()).unwrap_or_default() {
        if c.valid != Validity::False {
            continue;
        }
        let color = super::plot::style::checker_color(&c.name);
        let mut mine: Vec<Violation> = c
            .evidence
            .iter()
            .filter_map(|e| {
                Some(Violation {
                    checker: c.name.clone(),
                    time_ns: e.time_ns?,
                    index: event_index(&e.event),
                    color,
                })
            })
            .collect();
        mine.sort_by_key(|v| v.time_ns);
        out.extend(mine);
    }
    out
}

/// The `index` of a quoted history event.
pub fn event_index(event: &serde_json::Value) -> Option<u64> {
    event.get("index").and_then(|i| i.as_u64())
}

/// The first violation of each invalid checker (the zoomed plots' centres).
pub fn firsts(violations: &[Violation]) -> Vec<&Violation> {
    let mut out: Vec<&Violation> = Vec::new();
    for v in violations {
        if !out.iter().any(|o| o.checker == v.checker) {
            out.push(v);
        }
    }
    out
}

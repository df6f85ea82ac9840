//! Stale leaders, leaderless windows and leader overlaps as tables (valid, as in ZooKeeper,
//! but a reader must see them): read from the typed measurements of the recovery checker
//! (windows and overlaps, `history::view`'s) and of leader-stepdown (stretches a node kept
//! LEADING without a quorum).

use super::text::escape;
use crate::checker::leader_stepdown::StepdownMeasurements;
use crate::checker::recovery::RecoveryMeasurements;
use crate::checker::{Measurements, Results};
use crate::duration::moment;
use std::fmt::Write;

/// Rows shown per table; the rest are counted.
const ROWS: usize = 100;

/// The section, or an empty string when no checker measured any of them.
pub fn leadership(results: Option<&Results>) -> String {
    let Some(r) = results else {
        return String::new();
    };
    let mut h = String::new();
    for c in &r.checkers {
        match &c.measurements {
            Measurements::Stepdown(m) => stale_leaders(&mut h, m),
            Measurements::Recovery(m) => {
                leaderless_windows(&mut h, m);
                leader_overlaps(&mut h, m);
            }
            _ => {}
        }
    }
    if h.is_empty() {
        return h;
    }
    format!(
        "<h2 id=\"leadership\">Leadership: stale leaders, leaderless windows, overlaps</h2>\n{h}"
    )
}

/// The stale leaders table (leader-stepdown's stretches of a leader without a quorum).
fn stale_leaders(h: &mut String, m: &StepdownMeasurements) {
    let _ = writeln!(
        h,
        "<h3>Stale leaders</h3><p>Stretches in which a node kept reporting LEADING \
         without a quorum behind it ({} in all; longer than the bound is invalid: \
         syncLimit·tickTime {} ms or initLimit·tickTime {} ms, plus {} ms slack).</p>",
        m.unbacked_count, m.sync_bound_ms, m.init_bound_ms, m.slack_ms
    );
    if m.unbacked.is_empty() {
        *h += "<p id=\"stale-leaders\">None.</p>\n";
        return;
    }
    *h += "<table id=\"stale-leaders\"><tr><th>node</th><th>epoch</th><th>from</th>\
          <th>to</th><th>for</th><th>bound</th><th>judged</th></tr>\n";
    for u in m.unbacked.iter().take(ROWS) {
        let judged = if u.clock_fault {
            "not judged (clock fault)"
        } else if u.ms > u.bound_ms {
            "too long"
        } else {
            "within the bound"
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} ms</td>\
             <td>{} ms</td><td>{judged}</td></tr>",
            escape(&u.node),
            u.epoch,
            moment(u.start_ns),
            moment(u.end_ns),
            u.ms,
            u.bound_ms
        );
    }
    more(h, m.unbacked.len(), 7);
    *h += "</table>\n";
}

/// The leaderless windows table (recovery's).
fn leaderless_windows(h: &mut String, m: &RecoveryMeasurements) {
    let _ = writeln!(
        h,
        "<h3>Leaderless windows</h3><p>Stretches without a quorum-backed leader: {} \
         in all, {} ms together, the longest {}.</p>",
        m.leaderless_windows_count,
        m.leaderless_ms_total,
        m.leaderless_ms_max
            .map_or("—".into(), |x| format!("{x} ms"))
    );
    if m.leaderless_windows.is_empty() {
        *h += "<p id=\"leaderless-windows\">None.</p>\n";
    } else {
        *h += "<table id=\"leaderless-windows\"><tr><th>from</th><th>to</th>\
              <th>for</th></tr>\n";
        for w in m.leaderless_windows.iter().take(ROWS) {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}{}</td><td>{} ms</td></tr>",
                moment(w.start_ns),
                moment(w.end_ns),
                if w.open_at_end {
                    " (still open at the end)"
                } else {
                    ""
                },
                w.ms
            );
        }
        more(h, m.leaderless_windows.len(), 3);
        *h += "</table>\n";
    }
}

/// The leader overlaps table (recovery's: two or more nodes claiming to lead at once).
fn leader_overlaps(h: &mut String, m: &RecoveryMeasurements) {
    let _ = writeln!(
        h,
        "<h3>Leader overlaps</h3><p>Stretches in which two or more nodes claimed to \
         lead established epochs at once (an old leader that has not noticed yet): \
         {} in all, {} ms together.</p>",
        m.leader_overlaps_count, m.leader_overlap_ms_total
    );
    if m.leader_overlaps.is_empty() {
        *h += "<p id=\"leader-overlaps\">None.</p>\n";
    } else {
        *h += "<table id=\"leader-overlaps\"><tr><th>from</th><th>to</th><th>for</th>\
              <th>who claimed to lead</th></tr>\n";
        for o in m.leader_overlaps.iter().take(ROWS) {
            let who: Vec<String> = o
                .leaders
                .iter()
                .map(|l| format!("{} (epoch {})", l.node, l.epoch))
                .collect();
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}{}</td><td>{} ms</td><td>{}</td></tr>",
                moment(o.start_ns),
                moment(o.end_ns),
                if o.open_at_end {
                    " (still open at the end)"
                } else {
                    ""
                },
                o.ms,
                escape(&who.join(", "))
            );
        }
        more(h, m.leader_overlaps.len(), 4);
        *h += "</table>\n";
    }
}

fn more(h: &mut String, n: usize, cols: usize) {
    if n > ROWS {
        let _ = writeln!(
            h,
            "<tr><td colspan=\"{cols}\">… {} more in results.json</td></tr>",
            n - ROWS
        );
    }
}

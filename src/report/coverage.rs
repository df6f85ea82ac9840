//! The coverage section: which situations (`history::situation`) the run's faults met, from
//! results.json's typed `coverage`, as two grids (fault kind against whom it hit, and against
//! the protocol's phase), the list of situations met, and what no fault met. A valid verdict
//! over thin coverage says so: it tested little.

use super::text::escape;
use crate::checker::Results;
use crate::duration::moment;
use crate::history::situation::{self, Coverage, Met, Phase, Who};
use crate::history::FaultKind;
use std::fmt::Write;

/// The section.
pub fn section(results: Option<&Results>) -> String {
    let mut h = String::from("<h2 id=\"coverage\">Coverage</h2>\n");
    let Some(c) = results.and_then(|r| r.coverage.as_ref()) else {
        h += "<p class=\"note\">No coverage in results.json (written by an older fle-chaos, or \
              the history could not be read): run <code>fle-chaos check RUN_DIR</code> again.</p>\n";
        return h;
    };
    let _ = writeln!(
        h,
        "<p>Each fault that landed, classified by what the history showed just before it: \
         whom it hit, the protocol's phase, what else was in force. {}.</p>",
        escape(&c.summary())
    );
    if let Some(why) = c.thin() {
        let _ = writeln!(
            h,
            "<p class=\"note\" id=\"coverage-thin\">Thin coverage: {}. Whatever the verdict, \
             this run exercised little.</p>",
            escape(&why)
        );
    }
    if c.met.is_empty() {
        return h;
    }
    grid(
        &mut h,
        c,
        "coverage-whom",
        "whom",
        &Who::ALL.map(|w| w.word()),
        |m, i| m.situation.who == Who::ALL[i],
    );
    grid(
        &mut h,
        c,
        "coverage-phase",
        "phase",
        &Phase::ALL.map(|p| p.word()),
        |m, i| m.situation.phase == Phase::ALL[i],
    );
    h += "<table id=\"coverage-met\"><tr><th>situation</th><th>faults</th><th>first at</th></tr>\n";
    for m in &c.met {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{} (event {})</td></tr>",
            escape(&m.situation.label()),
            m.count,
            moment(m.first_ns),
            m.first_index
        );
    }
    h += "</table>\n";
    let _ = writeln!(
        h,
        "<p id=\"coverage-never\">Never met: {}.</p>",
        escape(&situation::never_met(c.met.iter().map(|m| &m.situation)))
    );
    h
}

/// One grid: a row per fault kind that landed, a column per value of one dimension, each
/// cell the faults that met it (empty: never).
fn grid(
    h: &mut String,
    c: &Coverage,
    id: &str,
    dimension: &str,
    columns: &[&str],
    is: impl Fn(&Met, usize) -> bool,
) {
    let _ = write!(h, "<table id=\"{id}\"><tr><th>fault \\ {dimension}</th>");
    for col in columns {
        let _ = write!(h, "<th>{}</th>", escape(col));
    }
    h.push_str("</tr>\n");
    let kinds: Vec<FaultKind> = c.kinds().into_iter().collect();
    for kind in kinds {
        let _ = write!(h, "<tr><td>{}</td>", kind.name());
        for i in 0..columns.len() {
            let n: u64 = (c.met.iter())
                .filter(|m| m.situation.kind == kind && is(m, i))
                .map(|m| m.count)
                .sum();
            if n == 0 {
                h.push_str("<td class=\"never\"></td>");
            } else {
                let _ = write!(h, "<td>{n}</td>");
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
}

//! The account: one paragraph per invalid checker, in words, at the top of the page: what
//! was violated (the checker's own first sentence), who and when (from the typed evidence:
//! the events, their nodes and times), and under which leadership and faults (the `Moment`
//! `history::view` gave at the first evidence event), then who led next; when the evidence
//! involves an observer, it says which nodes are observers, since a reader cannot tell from a
//! name. Nothing here decides anything: it only puts the checker's and the view's facts into
//! sentences.

use super::moment::{LeaderChange, Moment};
use super::text::escape;
use crate::checker::{CheckResult, Evidence, Measurements, Validity};
use crate::duration::moment;
use std::collections::{BTreeMap, BTreeSet};

/// The account paragraph of `c` as HTML (empty unless it is invalid); `observers` are the
/// run's observers (test.json).
pub fn paragraph(
    c: &CheckResult,
    moments: &BTreeMap<u64, Moment>,
    changes: &[LeaderChange],
    observers: &[String],
) -> String {
    if c.valid != Validity::False {
        return String::new();
    }
    let text = sentences(c, moments, changes, observers);
    format!(
        "<p class=\"account\" id=\"account-{0}\" style=\"border-left-color:{1}\">\
         <b>{0}</b>: {2} <a href=\"#evidence-{0}\">evidence</a></p>\n",
        escape(&c.name),
        super::violations::hex(super::plot::style::checker_color(&c.name)),
        escape(&text)
    )
}

/// The account in plain words.
pub fn sentences(
    c: &CheckResult,
    moments: &BTreeMap<u64, Moment>,
    changes: &[LeaderChange],
    observers: &[String],
) -> String {
    let mut out = vec![first_sentence(&c.explanation)];
    if let Some(who) = who_and_when(c) {
        out.push(who);
    }
    let mut timed: Vec<&Evidence> = c.evidence.iter().filter(|e| e.time_ns.is_some()).collect();
    timed.sort_by_key(|e| e.time_ns);
    let first = timed
        .iter()
        .find_map(|e| moments.get(&super::violations::event_index(&e.event)?));
    if let Some(m) = first {
        out.push(circumstances(m));
        if let Some(next) = next_leader(m, changes) {
            out.push(next);
        }
    }
    if let Some(o) = observers_named(c, first, observers) {
        out.push(o);
    }
    out.join(" ")
}

/// "n6 and n7 are observers: they count toward no election or commit quorum." when the
/// evidence, or the cut at the first evidence event, involves an observer (a reader of "n2
/// and n6 cut off" needs to know that only one voter went).
fn observers_named(c: &CheckResult, m: Option<&Moment>, observers: &[String]) -> Option<String> {
    let in_evidence = |o: &String| c.evidence.iter().any(|e| e.node.as_ref() == Some(o));
    let in_cut = |o: &String| m.is_some_and(|m| m.cut.contains_key(o));
    let named: Vec<&str> = observers
        .iter()
        .filter(|o| in_evidence(o) || in_cut(o))
        .map(String::as_str)
        .collect();
    match named.as_slice() {
        [] => None,
        [one] => Some(format!(
            "{one} is an observer: it counts toward no election or commit quorum."
        )),
        [init @ .., last] => Some(format!(
            "{} and {last} are observers: they count toward no election or commit quorum.",
            init.join(", ")
        )),
    }
}

/// The explanation's first sentence (a period followed by a space and a capital, or the end).
fn first_sentence(explanation: &str) -> String {
    let b = explanation.as_bytes();
    let end = (0..b.len().saturating_sub(2))
        .find(|&i| b[i] == b'.' && b[i + 1] == b' ' && b[i + 2].is_ascii_uppercase())
        .map(|i| i + 1)
        .unwrap_or(explanation.len());
    super::text::shorten(&explanation[..end], 400)
}

/// "The evidence: 3 acknowledged writes (values 105, 103, 107) acknowledged by n5 between
/// 5.200 s and 6.100 s; the final logs of n1, n2."
fn who_and_when(c: &CheckResult) -> Option<String> {
    let mut acks: Vec<(&Evidence, String)> = Vec::new();
    let mut others: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in &c.evidence {
        let f = e.event.get("f").and_then(|f| f.as_str()).unwrap_or("event");
        let kind = e.event.get("type").and_then(|t| t.as_str()).unwrap_or("");
        if f == "write" && kind == "ok" {
            let v = e.event.pointer("/value/value").map(|v| v.to_string());
            acks.push((e, v.unwrap_or_else(|| "?".into())));
        } else {
            let what = match (f, kind) {
                ("final-log", _) => "the final logs of".to_string(),
                ("status", "ok") => "status reads of".to_string(),
                (f, "") => format!("{f} events of"),
                (f, k) => format!("{f} ({k}) events of"),
            };
            others
                .entry(what)
                .or_default()
                .insert(e.node.clone().unwrap_or_else(|| "the controller".into()));
        }
    }
    let mut parts = Vec::new();
    if !acks.is_empty() {
        let lost = match &c.measurements {
            Measurements::Durability(m) if !m.lost.is_empty() => Some(m.lost.len()),
            _ => None,
        };
        let nodes: BTreeSet<&str> = acks.iter().filter_map(|(e, _)| e.node.as_deref()).collect();
        let times: Vec<u64> = acks.iter().filter_map(|(e, _)| e.time_ns).collect();
        let values: Vec<&str> = acks.iter().take(6).map(|(_, v)| v.as_str()).collect();
        let mut s = format!(
            "{} acknowledged write{} (value{} {}{})",
            acks.len(),
            plural(acks.len()),
            plural(acks.len()),
            values.join(", "),
            if acks.len() > values.len() {
                ", …"
            } else {
                ""
            }
        );
        if !nodes.is_empty() {
            s += &format!(
                " acknowledged by {}",
                nodes.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
        if let (Some(a), Some(b)) = (times.iter().min(), times.iter().max()) {
            s += &if a == b {
                format!(" at {}", moment(*a))
            } else {
                format!(" between {} and {}", moment(*a), moment(*b))
            };
        }
        if let Some(n) = lost {
            s += &format!(
                " ({}{n} lost write{} in all, see durability's measurements)",
                if n >= 100 { "at least " } else { "" },
                plural(n)
            );
        }
        parts.push(s);
    }
    for (what, nodes) in others {
        parts.push(format!(
            "{what} {}",
            nodes.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    (!parts.is_empty()).then(|| format!("The evidence: {}.", parts.join("; ")))
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// "At 5.200 s (history line 1235) n5 claimed to lead epoch 1 without a quorum behind it;
/// there was no quorum-backed leader; in force: partition since 5.000 s (n5 cut off from n1,
/// n2, n3, n4)."
pub fn circumstances(m: &Moment) -> String {
    let mut s = format!("At {} (history line {})", moment(m.time_ns), m.line_no);
    let backed = |node: &str, epoch: u64| {
        m.quorum_leader
            .as_ref()
            .is_some_and(|(n, e)| n == node && *e == epoch)
    };
    let claims: Vec<String> = m
        .claims
        .iter()
        .map(|c| {
            format!(
                "{} claimed to lead epoch {}{}",
                c.node,
                c.epoch,
                if backed(&c.node, c.epoch) {
                    " with a quorum following"
                } else {
                    " without a quorum behind it"
                }
            )
        })
        .collect();
    if claims.is_empty() {
        s += " no node claimed to lead an established epoch";
    } else {
        s += &format!(" {}", claims.join(", "));
    }
    match &m.quorum_leader {
        Some((n, e)) if !m.claims.iter().any(|c| &c.node == n) => {
            s += &format!("; the quorum-backed leader was {n} (epoch {e})")
        }
        Some(_) => {}
        None => s += "; there was no quorum-backed leader",
    }
    if m.faults.is_empty() {
        s += "; no fault was in force.";
    } else {
        let faults: Vec<String> = m.faults.iter().map(|f| fault_words(f, m)).collect();
        s += &format!("; in force: {}.", faults.join("; "));
    }
    s
}

/// "partition since 5.000 s (n5 cut off from n1, n2)", "kill of n3 since 2.000 s".
pub fn fault_words(f: &crate::history::view::FaultInterval, m: &Moment) -> String {
    let on = if f.nodes.is_empty() {
        String::new()
    } else {
        format!(" of {}", f.nodes.join(", "))
    };
    let mut s = format!("{}{on} since {}", f.kind.name(), moment(f.start_ns));
    if f.kind == crate::history::FaultKind::Partition && !m.cut.is_empty() {
        s += &format!(" ({})", cut_words(m));
    }
    s
}

/// "n5 cut off from n1, n2, n3, n4": nodes with the same cut grouped, each group named from
/// its smaller side (an isolated leader, not the four nodes that cannot hear it).
pub fn cut_words(m: &Moment) -> String {
    let mut groups: Vec<(Vec<&str>, &Vec<String>)> = Vec::new();
    for (n, from) in &m.cut {
        match groups.iter_mut().find(|g| g.1 == from) {
            Some(g) => g.0.push(n),
            None => groups.push((vec![n], from)),
        }
    }
    let words: Vec<String> = groups
        .iter()
        .filter(|(who, from)| who.len() <= from.len())
        .map(|(who, from)| format!("{} cut off from {}", who.join(" and "), from.join(", ")))
        .collect();
    words.join("; ")
}

/// "n4 led epoch 2 (quorum-backed) from 6.300 s." — the first quorum-backed leader after the
/// moment other than the one then.
fn next_leader(m: &Moment, changes: &[LeaderChange]) -> Option<String> {
    let next = changes
        .iter()
        .filter(|c| c.time_ns > m.time_ns)
        .find_map(|c| {
            c.leader
                .as_ref()
                .filter(|l| Some(*l) != m.quorum_leader.as_ref())
                .map(|l| (c, l))
        })?;
    let (c, (node, epoch)) = next;
    Some(format!(
        "Next, {node} led epoch {epoch} with a quorum from {} (history index {}).",
        moment(c.time_ns),
        c.index
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn invalid(evidence_nodes: &[&str]) -> CheckResult {
        CheckResult {
            name: "observers".into(),
            valid: Validity::False,
            explanation: "A txn was served that no quorum committed. More words.".into(),
            evidence: evidence_nodes
                .iter()
                .map(|n| {
                    Evidence::quoting(
                        "read",
                        json!({"node": n, "time": 5, "f": "status", "type": "ok"}),
                    )
                })
                .collect(),
            measurements: Measurements::default(),
            applicable: true,
            kinds: Default::default(),
        }
    }

    #[test]
    fn observers_are_named_only_when_the_evidence_involves_them() {
        let observers = ["n6".to_string(), "n7".to_string()];
        let none = BTreeMap::new();
        let one = sentences(&invalid(&["n2", "n6"]), &none, &[], &observers);
        assert!(
            one.contains("n6 is an observer: it counts toward no"),
            "{one}"
        );
        assert!(!one.contains("n7"), "n7 is not in the evidence: {one}");
        let both = sentences(&invalid(&["n7", "n6"]), &none, &[], &observers);
        assert!(both.contains("n6 and n7 are observers"), "{both}");
        let voters_only = sentences(&invalid(&["n1"]), &none, &[], &observers);
        assert!(!voters_only.contains("observer"), "{voters_only}");
        let no_observers = sentences(&invalid(&["n6"]), &none, &[], &[]);
        assert!(!no_observers.contains("observer"), "{no_observers}");
    }
}

//! Evidence as rows a person can read: time since the start, node, the event (kind and a link
//! to it in the history), the fields that matter, and why it matters; the raw JSON stays one
//! click away, folded. The link is `history.jsonl?around=INDEX`: opened from disk it is the
//! history file (the text says which line), under `fle-chaos serve` the history view at that
//! event.

use super::moment::Moment;
use super::text::{escape, shorten};
use crate::checker::{CheckResult, Evidence};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Evidence rows shown per checker; the rest are counted (they are in results.json).
pub const ROWS: usize = 50;
const RAW_CHARS: usize = 1_500;

/// The link to history event `index` (see the module comment).
pub fn history_href(index: u64) -> String {
    format!("history.jsonl?around={index}")
}

/// The evidence table of one checker (empty string when it has none).
pub fn table(c: &CheckResult, moments: &BTreeMap<u64, Moment>) -> String {
    if c.evidence.is_empty() {
        return String::new();
    }
    let mut h = format!(
        "<table class=\"evidence\" id=\"evidence-{}\"><tr><th>time</th><th>node</th>\
         <th>event</th><th>what</th><th>why it matters</th></tr>\n",
        escape(&c.name)
    );
    for e in c.evidence.iter().take(ROWS) {
        row(&mut h, e, moments);
    }
    if c.evidence.len() > ROWS {
        let _ = writeln!(
            h,
            "<tr><td colspan=\"5\">… {} more in results.json</td></tr>",
            c.evidence.len() - ROWS
        );
    }
    h += "</table>\n";
    h
}

fn row(h: &mut String, e: &Evidence, moments: &BTreeMap<u64, Moment>) {
    let index = super::violations::event_index(&e.event);
    let f = e.event.get("f").and_then(Value::as_str).unwrap_or("");
    let kind = e.event.get("type").and_then(Value::as_str).unwrap_or("");
    let link = match index {
        Some(i) => {
            let line = moments.get(&i).map_or(i + 1, |m| m.line_no);
            format!(
                "<a class=\"ev\" data-index=\"{i}\" href=\"{}\">line {line}</a>",
                history_href(i)
            )
        }
        None => "—".into(),
    };
    let raw = shorten(&e.event.to_string(), RAW_CHARS);
    let _ = writeln!(
        h,
        "<tr><td>{}</td><td>{}</td><td>{} {}<br>{link}</td><td>{}<details><summary>JSON</summary>\
         <pre>{}</pre></details></td><td>{}</td></tr>",
        e.time_ns.map_or("—".into(), crate::duration::moment),
        escape(e.node.as_deref().unwrap_or("—")),
        escape(f),
        escape(kind),
        escape(&fields(&e.event)),
        escape(&raw),
        escape(&e.why)
    );
}

/// The fields that matter of an event's value, as "key value" pairs: zxids in hex, final
/// logs by their size, anything unknown by its first few keys.
pub fn fields(event: &Value) -> String {
    let Some(v) = event.get("value") else {
        return String::new();
    };
    let Some(obj) = v.as_object() else {
        return shorten(&v.to_string(), 120);
    };
    const KEYS: [&str; 12] = [
        "value",
        "zxid",
        "state",
        "leader",
        "peer_epoch",
        "accepted_epoch",
        "zab_phase",
        "last_zxid",
        "last_committed_zxid",
        "nodes",
        "error",
        "entries_total",
    ];
    let mut out: Vec<String> = Vec::new();
    for k in KEYS {
        let Some(x) = obj.get(k) else { continue };
        let text = match (k, x.as_u64()) {
            ("zxid" | "last_zxid" | "last_committed_zxid", Some(z)) => format!("{z:#x}"),
            _ => match x {
                Value::String(s) => s.clone(),
                other => shorten(&other.to_string(), 80),
            },
        };
        let key = match k {
            "peer_epoch" => "epoch",
            "entries_total" => "entries",
            k => k,
        };
        out.push(format!("{key} {text}"));
    }
    if let Some(entries) = obj.get("entries").and_then(Value::as_array) {
        if !obj.contains_key("entries_total") {
            out.push(format!("entries {}", entries.len()));
        }
    }
    if out.is_empty() {
        out = obj
            .iter()
            .take(4)
            .map(|(k, x)| format!("{k} {}", shorten(&x.to_string(), 60)))
            .collect();
    }
    out.join(", ")
}

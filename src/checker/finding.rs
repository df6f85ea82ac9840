//! What a checker returns before its evidence is resolved: the verdict, the explanation, and
//! pointers into the history (`EvRef`) that `mod.rs` turns into the quoted original events.

use super::kind::{Kind, Kinds};
use super::Validity;

/// One piece of evidence: the history event at `pos`, and why it matters.
#[derive(Debug, Clone)]
pub struct EvRef {
    pub pos: u32,
    pub why: String,
    /// For a final log: the entry that matters (only entries around it are quoted).
    pub entry: Option<usize>,
}

impl EvRef {
    pub fn new(pos: u32, why: impl Into<String>) -> Self {
        EvRef {
            pos,
            why: why.into(),
            entry: None,
        }
    }

    pub fn at_entry(mut self, i: usize) -> Self {
        self.entry = Some(i);
        self
    }
}

/// A final log can hold a whole run's writes: quote only a few entries of it (around the one
/// that matters), saying which and how many there are.
pub fn trim_log(event: &mut serde_json::Value, entry: Option<usize>) {
    const AROUND: usize = 3;
    let Some(entries) = event
        .get_mut("value")
        .and_then(|v| v.get_mut("entries"))
        .and_then(|e| e.as_array_mut())
    else {
        return;
    };
    let total = entries.len();
    let from = entry.map_or(0, |i| i.saturating_sub(AROUND)).min(total);
    let to = entry.map_or(2 * AROUND, |i| i + AROUND + 1).min(total);
    if from == 0 && to == total {
        return;
    }
    let kept: Vec<serde_json::Value> = entries.drain(from..to).collect();
    *entries = kept;
    let value = event.get_mut("value").and_then(|v| v.as_object_mut());
    if let Some(value) = value {
        value.insert("entries_total".into(), total.into());
        value.insert("entries_shown_from".into(), from.into());
    }
}

/// A violation or a gap: one sentence and the events behind it.
pub type Item = (String, Vec<EvRef>);

/// A violation with its kind, for a checker that classifies its violations.
pub type KindedItem = (Kind, Item);

/// A checker's verdict with unresolved evidence.
#[derive(Debug, Clone)]
pub struct Finding {
    pub valid: Validity,
    pub explanation: String,
    pub evidence: Vec<EvRef>,
    pub measurements: super::Measurements,
    /// How many violations of each kind (empty unless the checker classifies them).
    pub kinds: Kinds,
}

impl Finding {
    /// Verdict from what was found: any violation makes it false; else any gap in the evidence
    /// makes it unknown (with the reasons); else true with `ok_text`.
    pub fn judge(violations: Vec<Item>, gaps: Vec<Item>, ok_text: String) -> Finding {
        let (valid, items) = if !violations.is_empty() {
            (Validity::False, violations)
        } else if !gaps.is_empty() {
            (Validity::Unknown, gaps)
        } else {
            return Finding {
                valid: Validity::True,
                explanation: ok_text,
                evidence: Vec::new(),
                measurements: super::Measurements::None,
                kinds: Kinds::new(),
            };
        };
        /// Enough items to read; the rest are counted, not listed.
        const SHOWN: usize = 5;
        let n = items.len();
        let mut text: Vec<String> = items.iter().take(SHOWN).map(|v| v.0.clone()).collect();
        if n > SHOWN {
            text.push(format!("({} more not listed.)", n - SHOWN));
        }
        let evidence = items.into_iter().take(SHOWN).flat_map(|v| v.1).collect();
        Finding {
            valid,
            explanation: text.join(" "),
            evidence,
            measurements: super::Measurements::None,
            kinds: Kinds::new(),
        }
    }

    /// `judge` for a checker that classifies every violation: the kinds are counted.
    pub fn judge_kinds(violations: Vec<KindedItem>, gaps: Vec<Item>, ok_text: String) -> Finding {
        let mut kinds = Kinds::new();
        for (k, _) in &violations {
            *kinds.entry(*k).or_default() += 1;
        }
        let items = violations.into_iter().map(|(_, item)| item).collect();
        let mut f = Finding::judge(items, gaps, ok_text);
        f.kinds = kinds;
        f
    }

    pub fn with_measurements(mut self, m: impl Into<super::Measurements>) -> Self {
        self.measurements = m.into();
        self
    }
}

#[cfg(test)]
mod tests {
    use super::trim_log;
    use serde_json::json;

    fn log(n: u64) -> serde_json::Value {
        let entries: Vec<_> = (0..n).map(|z| json!({"zxid": z, "value": z})).collect();
        json!({"index": 9, "f": "final-log", "value": {"entries": entries, "last_committed_zxid": n}})
    }

    #[test]
    fn a_long_final_log_is_quoted_around_the_entry_that_matters() {
        let mut e = log(100);
        trim_log(&mut e, Some(50));
        let shown: Vec<u64> = e["value"]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["zxid"].as_u64().unwrap())
            .collect();
        assert_eq!(shown, (47..=53).collect::<Vec<_>>());
        assert_eq!(
            (
                e["value"]["entries_total"].as_u64(),
                e["value"]["entries_shown_from"].as_u64()
            ),
            (Some(100), Some(47))
        );

        let mut e = log(100);
        trim_log(&mut e, None);
        assert_eq!(e["value"]["entries"].as_array().unwrap().len(), 6);

        // Short logs, and entries past the end, are quoted whole.
        let mut e = log(4);
        trim_log(&mut e, Some(3));
        assert_eq!(e, log(4));
        let mut e = log(100);
        trim_log(&mut e, Some(100));
        assert_eq!(e["value"]["entries_shown_from"].as_u64(), Some(97));
    }
}

//! What a checker returns before its evidence is resolved: the verdict, the explanation, and
//! pointers into the history (`EvRef`) that `mod.rs` turns into the quoted original events.

use super::Validity;

/// One piece of evidence: the history event at `pos`, and why it matters.
#[derive(Debug, Clone)]
pub struct EvRef {
    pub pos: u32,
    pub why: String,
}

impl EvRef {
    pub fn new(pos: u32, why: impl Into<String>) -> Self {
        EvRef {
            pos,
            why: why.into(),
        }
    }
}

/// A violation or a gap: one sentence and the events behind it.
pub type Item = (String, Vec<EvRef>);

/// A checker's verdict with unresolved evidence.
#[derive(Debug, Clone)]
pub struct Finding {
    pub valid: Validity,
    pub explanation: String,
    pub evidence: Vec<EvRef>,
    pub measurements: serde_json::Value,
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
                measurements: serde_json::Value::Null,
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
            measurements: serde_json::Value::Null,
        }
    }

    pub fn with_measurements(mut self, m: serde_json::Value) -> Self {
        self.measurements = m;
        self
    }
}

/// "1.234 s" from nanoseconds, for explanations.
pub fn secs(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

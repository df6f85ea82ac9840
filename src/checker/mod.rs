//! Checkers: each property of a run is one small checker that reads the history and returns a
//! verdict, a one-paragraph explanation and the minimal evidence, as Jepsen's checkers do.
//! `check_all` composes them into one verdict: false beats unknown beats true.

use serde::{Deserialize, Serialize};

pub mod cli;

/// Jepsen's `valid?`: true, false or unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Validity {
    True,
    False,
    Unknown,
}

impl Validity {
    /// Combines two verdicts: false beats unknown beats true.
    pub fn and(self, other: Validity) -> Validity {
        use Validity::*;
        match (self, other) {
            (False, _) | (_, False) => False,
            (Unknown, _) | (_, Unknown) => Unknown,
            _ => True,
        }
    }

    /// The process exit code for this verdict (Jepsen's: 0 valid, 1 invalid, 2 unknown).
    pub fn exit_code(self) -> i32 {
        match self {
            Validity::True => crate::exit::VALID,
            Validity::False => crate::exit::INVALID,
            Validity::Unknown => crate::exit::UNKNOWN,
        }
    }
}

/// One checker's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckResult {
    /// The checker's name ("election-safety", "durability", ...).
    pub name: String,
    pub valid: Validity,
    /// One paragraph a person can read.
    pub explanation: String,
    /// The history events (or derived facts) that prove the verdict; minimal.
    #[serde(default)]
    pub evidence: Vec<serde_json::Value>,
    /// Measurements (recovery times, leaderless windows...), checker-specific.
    #[serde(default)]
    pub measurements: serde_json::Value,
}

/// `results.json`: every checker's result and the combined verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    pub valid: Validity,
    pub checkers: Vec<CheckResult>,
}

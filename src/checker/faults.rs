//! faults: a run that asked for faults injected some. The controller records how many faults
//! its seeded plan held (test.json `settings.faults_planned`); if the history shows none of
//! them done (each failed, or found no node to hit), the run tested a quiet cluster only and
//! its verdict is unknown, never a silent pass. Runs that asked for no faults, or were
//! recorded before the plan was, are not judged here.

use super::finding::{Finding, Item};
use super::model::{Digest, Rec};
use crate::history::test_info::TestInfo;

pub const NAME: &str = "faults";

/// The test.json settings key the controller writes the plan's size under.
pub const PLANNED_KEY: &str = "faults_planned";

pub fn check(d: &Digest, info: &TestInfo) -> Finding {
    let planned = info.settings.rest.get(PLANNED_KEY).and_then(|v| v.as_u64());
    let injected = d
        .records()
        .filter(|r| matches!(r, Rec::Nemesis(op) if op.starts_fault() && !op.value.r#final))
        .count();
    let mut gaps: Vec<Item> = Vec::new();
    let ok = match planned {
        None => "The run does not record a fault plan (recorded before plans were); not judged."
            .to_string(),
        Some(0) => "The run asked for no faults.".to_string(),
        Some(n) if injected == 0 => {
            gaps.push((
                format!(
                    "The plan held {n} faults but none was injected (each failed or found no node \
                     to hit: see the nemesis events), so the run tested a quiet cluster only."
                ),
                Vec::new(),
            ));
            String::new()
        }
        Some(n) => format!("{injected} faults were injected ({n} planned)."),
    };
    Finding::judge(Vec::new(), gaps, ok)
}

//! faults: a run that asked for faults injected some. The controller records how many faults
//! its seeded plan held (test.json `settings.faults_planned`); if the history shows none of
//! them done (each failed, or found no node to hit), the run tested a quiet cluster only and
//! its verdict is unknown, never a silent pass. A run recorded without the plan is judged by
//! the fault kinds test.json lists. Runs that asked for no faults are not judged here.

use super::finding::{Finding, Item};
use super::model::{Digest, Rec};
use crate::history::test_info::TestInfo;

pub const NAME: &str = "faults";

pub fn check(d: &Digest, info: &TestInfo) -> Finding {
    let planned = info.settings.faults_planned;
    let injected = d
        .records()
        .filter(|r| matches!(r, Rec::Nemesis(op) if op.starts_fault() && !op.value.r#final))
        .count();
    let mut gaps: Vec<Item> = Vec::new();
    // Without a recorded plan (runs before plans were), test.json's fault kinds say whether
    // faults were asked for.
    let asked = planned.map_or(!info.nemesis.is_empty(), |n| n > 0);
    let plan = planned.map_or(format!("it asked for {}", info.nemesis.join(", ")), |n| {
        format!("the plan held {n}")
    });
    let ok = if !asked {
        "The run asked for no faults.".to_string()
    } else if injected == 0 {
        gaps.push((
            format!(
                "No fault was injected although {plan} (each failed or found no node to hit: \
                 see the nemesis events), so the run tested a quiet cluster only."
            ),
            Vec::new(),
        ));
        String::new()
    } else {
        format!("{injected} faults were injected ({plan}).")
    };
    Finding::judge(Vec::new(), gaps, ok)
}

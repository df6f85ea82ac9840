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
        // A replaced server's kill is its reconfig's, counted once with it.
        .filter(|r| {
            matches!(r, Rec::Nemesis(op) if op.starts_fault()
                && !op.value.r#final
                && !op.value.made_by_replace(op.f))
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::model::digest_events;
    use crate::history::Event;

    fn info() -> TestInfo {
        serde_json::from_value(serde_json::json!({
            "name": "t", "target": "fle", "nodes": ["n1", "n2", "n3"], "workload": "election",
            "nemesis": ["reconfig"], "seed": 1, "time_limit_s": 10.0, "tick_ms": 100,
            "init_limit": 5, "sync_limit": 2, "started_at": "2026-11-30T00:00:00Z",
            "replay_command": "x", "version": "0", "settings": {"faults_planned": 1}
        }))
        .unwrap()
    }

    fn done(i: usize, f: &str, value: serde_json::Value) -> Event {
        serde_json::from_value(serde_json::json!({
            "index": i, "time": 1_000_000 * (i as u64 + 1), "process": "nemesis",
            "type": "info", "f": f, "node": "n3", "value": value
        }))
        .unwrap()
    }

    #[test]
    fn a_replaced_servers_kill_is_counted_with_its_reconfig_not_as_a_fault() {
        let events = vec![
            done(
                0,
                "remove",
                serde_json::json!({"nodes": ["n3"], "replace": true}),
            ),
            done(
                1,
                "kill",
                serde_json::json!({"nodes": ["n3"], "replace": true}),
            ),
            done(
                2,
                "start",
                serde_json::json!({"nodes": ["n3"], "wiped": true}),
            ),
        ];
        let nodes = info().nodes;
        let d = digest_events(&events, &nodes).unwrap();
        let f = check(&d, &info());
        assert!(
            f.explanation.contains("1 faults were injected"),
            "{}",
            f.explanation
        );
        let plain = [done(0, "kill", serde_json::json!({"nodes": ["n3"]}))];
        let d = digest_events(&plain, &nodes).unwrap();
        assert!(check(&d, &info())
            .explanation
            .contains("1 faults were injected"));
    }
}

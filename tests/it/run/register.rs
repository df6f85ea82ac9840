//! The register workload end to end on 3 real fle-nodes with the leader killed and restarted:
//! clients bound to servers create, set, compare-and-set and read (plain and after a sync)
//! through the data tree, every kind of operation succeeds at least once, and the clients'
//! view checkers judge the run as they judge any other: `linearizable` and `session-order`
//! valid, as the whole run, with nothing left behind.

use crate::support::run::*;
use fle_chaos::checker::Validity;
use fle_chaos::history::register::RegisterValue;
use fle_chaos::history::store::read_history;
use fle_chaos::history::{EventType, F};
use std::collections::BTreeMap;
use std::time::Duration;

#[test]
fn a_register_run_with_leader_kills_is_linearizable() {
    if !root_or_skip("a_register_run_with_leader_kills_is_linearizable") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("reports");
    let args = [
        "--nodes",
        "3",
        "--time-limit",
        "15",
        "--nemesis-file",
        "kill-leader",
        "--workload",
        "register",
        "--seed",
        "11",
    ];
    let mut child = spawn_test(&args, &out, &fle_node());
    let code = wait_exit(&mut child, Duration::from_secs(240));
    let stderr = std::fs::read_to_string(out.with_extension("stderr")).unwrap_or_default();
    let dir = run_dir(&out).expect("no run folder / latest link");
    assert_eq!(code, Some(0), "{stderr}\n{}", why_not_valid(&dir));

    let results = fle_chaos::commands::run::child::read_results(&dir).unwrap();
    for name in ["linearizable", "session-order"] {
        let c = results.checkers.iter().find(|c| c.name == name);
        let c = c.unwrap_or_else(|| panic!("no {name} in results.json"));
        assert_eq!(c.valid, Validity::True, "{name}: {}", c.explanation);
    }

    // Every kind of operation happened, each ok value as docs/history.md's table says.
    let history = read_history(&dir.join(fle_chaos::history::file::WRITTEN)).unwrap();
    let mut ok: BTreeMap<&str, usize> = BTreeMap::new();
    for e in history.iter().filter(|e| e.kind == EventType::Ok) {
        let name = match e.f {
            F::Create => "create",
            F::Set => "set",
            F::Cas => "cas",
            F::Read => "read",
            _ => continue,
        };
        let v: RegisterValue = serde_json::from_value(e.value.clone()).unwrap();
        assert!(
            v.key.starts_with('k') && v.version.is_some() && v.zxid.is_some(),
            "{e:?}"
        );
        assert!(
            e.node.is_some(),
            "an operation names the server that served it: {e:?}"
        );
        *ok.entry(name).or_default() += 1;
    }
    for name in ["create", "set", "cas", "read"] {
        assert!(
            ok.get(name).copied().unwrap_or(0) > 0,
            "no ok {name}: {ok:?}"
        );
    }
    assert!(
        !nemesis_done(&history, F::Kill).is_empty(),
        "the nemesis killed nothing"
    );
    assert_eq!(leftovers(&resources(&dir)), Vec::<String>::new());
}

//! `junit.xml`: one testsuite per run, one testcase per checker, so nightly CI shows each
//! property as a test. Invalid → `<failure>`, unknown → `<error>` (the property could not
//! be decided), both with the explanation as message and the evidence as body. A failure
//! that a known bug covers (`checker::known`) stays a failure, of type `known` and with a
//! message that starts "known: ZOOKEEPER-2846": a CI page tells it apart at a glance.

use super::text::{escape, shorten};
use crate::checker::{Results, Validity};
use crate::history::test_info::TestInfo;

const EVIDENCE_CHARS: usize = 8_000;

pub fn junit_xml(info: &TestInfo, results: Option<&Results>, duration_s: f64) -> String {
    let checkers = results.map(|r| r.checkers.as_slice()).unwrap_or(&[]);
    let count = |v: Validity| checkers.iter().filter(|c| c.valid == v).count();
    let missing = results.is_none() as usize;
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x += &format!(
        "<testsuites name=\"fle-chaos\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n",
        checkers.len() + missing,
        count(Validity::False),
        count(Validity::Unknown) + missing
    );
    x += &format!(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\" \
         timestamp=\"{}\" time=\"{:.3}\">\n",
        escape(&info.name),
        checkers.len() + missing,
        count(Validity::False),
        count(Validity::Unknown) + missing,
        info.started_at.format("%Y-%m-%dT%H:%M:%S"),
        duration_s
    );
    x += "    <properties>\n";
    for (k, v) in [
        ("seed", info.seed.to_string()),
        ("target", info.target.clone()),
        ("nodes", info.nodes.join(",")),
        ("workload", info.workload.clone()),
        ("nemesis", info.nemesis.join(",")),
        ("replay", info.replay_command.clone()),
        ("version", info.version.clone()),
        (
            "known",
            results.map_or(String::new(), |r| crate::checker::known::ids(&r.known)),
        ),
        (
            "resembles",
            results.map_or(String::new(), |r| {
                (r.resembles.iter().map(|x| x.id.clone()))
                    .collect::<Vec<_>>()
                    .join(", ")
            }),
        ),
        ("software", reported_versions(info)),
    ] {
        if v.is_empty() {
            continue;
        }
        x += &format!("      <property name=\"{k}\" value=\"{}\"/>\n", escape(&v));
    }
    x += "    </properties>\n";
    let class = format!("fle-chaos.{}", info.name);
    let known = results
        .filter(|r| !r.known.is_empty())
        .map(|r| crate::checker::known::ids(&r.known));
    for c in checkers {
        x += &format!(
            "    <testcase name=\"{}\" classname=\"{}\" time=\"0\">",
            escape(&c.name),
            escape(&class)
        );
        let tag = match c.valid {
            _ if !c.applicable => Some("skipped"),
            Validity::True => None,
            Validity::False => Some("failure"),
            Validity::Unknown => Some("error"),
        };
        match tag {
            None => x += "</testcase>\n",
            Some(tag) => {
                let evidence = c
                    .evidence
                    .iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("\n");
                let (kind, message) = match (tag, &known) {
                    ("failure", Some(ids)) => ("known", format!("known: {ids}. {}", c.explanation)),
                    ("failure", None) => ("invalid", c.explanation.clone()),
                    _ => ("unknown", c.explanation.clone()),
                };
                x += &format!(
                    "\n      <{tag} message=\"{}\" type=\"{kind}\">{}</{tag}>\n    </testcase>\n",
                    escape(&message),
                    escape(&shorten(&evidence, EVIDENCE_CHARS))
                );
            }
        }
    }
    if missing == 1 {
        x += &format!(
            "    <testcase name=\"checkers\" classname=\"{}\" time=\"0\">\n      <error \
             message=\"no results.json: the checkers did not run; run `fle-chaos check` on \
             this run folder\" type=\"unknown\"/>\n    </testcase>\n",
            escape(&class)
        );
    }
    x += "  </testsuite>\n</testsuites>\n";
    x
}

/// "3.9.6-${mvngit.commit.id}": the release the target's servers reported (one, or each with
/// its node when they differ); empty when none did.
pub(crate) fn reported_versions(info: &TestInfo) -> String {
    let Some(software) = &info.settings.software else {
        return String::new();
    };
    let mut distinct: Vec<&String> = software.versions.values().collect();
    distinct.sort();
    distinct.dedup();
    match distinct.as_slice() {
        [one] => one.to_string(),
        _ => (software.versions.iter())
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

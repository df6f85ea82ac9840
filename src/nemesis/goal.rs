//! Goals: the situation a schedule entry is there to meet (`[fault.goal]` in its table), so
//! that the steering nemesis (`steer`) deals that entry first while none of its faults has met
//! it (each open goal once before any twice). A goal is a pattern over
//! `history::situation::Situation`: the fault's kind, and optionally whom it hit, the phase
//! and what else had to be in force; the main fault or any composed part can meet it.
//! `mixed`'s entries aimed at one bug carry one (the power loss of the followers while the
//! leader is cut off names the situation that exposes ACK-before-durable bugs), so a default
//! writes run deals them before anything else, whatever the seed.

use crate::history::situation::{Phase, Situation, Who, With};
use crate::history::FaultKind;
use serde::Deserialize;

/// The situation an entry aims at; a field left out matches anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Goal {
    pub kind: FaultKind,
    pub who: Option<Who>,
    pub phase: Option<Phase>,
    /// Each of these must have been in force.
    pub with: Vec<With>,
}

impl Goal {
    /// Whether situation `s` is one this goal names.
    pub fn met_by(&self, s: &Situation) -> bool {
        s.kind == self.kind
            && self.who.is_none_or(|w| s.who == w)
            && self.phase.is_none_or(|p| s.phase == p)
            && self.with.iter().all(|w| s.with.contains(w))
    }

    /// Whether a run whose workload writes (`writes`) can meet it: a phase of client writes
    /// needs them.
    pub fn reachable(&self, writes: bool) -> bool {
        writes || !self.needs_writes()
    }

    /// Whether only a run whose workload writes can meet it (a phase of client writes): the
    /// ACK-before-durable class, which steering deals first in such a run.
    pub fn needs_writes(&self) -> bool {
        matches!(self.phase, Some(Phase::AfterAck | Phase::WritesInFlight))
    }

    /// "power-loss · quorum · after an ACK · with leader cut off", "any" for what is left out.
    pub fn label(&self) -> String {
        let who = self.who.map_or("anyone", Who::word);
        let phase = self.phase.map_or("any phase", Phase::word);
        crate::history::situation::label(self.kind, who, phase, &self.with)
    }
}

/// A `[fault.goal]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGoal {
    kind: String,
    who: Option<String>,
    phase: Option<String>,
    #[serde(default)]
    with: Vec<String>,
}

impl RawGoal {
    pub(super) fn parse(self) -> Result<Goal, String> {
        let kind = FaultKind::parse(&self.kind).ok_or_else(|| {
            format!(
                "goal: kind = \"{}\" is unknown; use {}",
                self.kind,
                words(FaultKind::ALL.iter().map(|k| k.name()))
            )
        })?;
        let who = one_of("who", self.who.as_deref(), &Who::ALL, Who::word)?;
        let phase = one_of("phase", self.phase.as_deref(), &Phase::ALL, Phase::key)?;
        let with = (self.with.iter())
            .map(|w| match w.as_str() {
                "leader-cut" => Ok(With::LeaderCut),
                "leader-down" => Ok(With::LeaderDown),
                other => FaultKind::parse(other).map(With::Fault).ok_or_else(|| {
                    format!("goal: with = \"{other}\" is unknown; use leader-cut, leader-down or a fault kind")
                }),
            })
            .collect::<Result<_, _>>()?;
        Ok(Goal {
            kind,
            who,
            phase,
            with,
        })
    }
}

/// The value of `all` named `given` (None when the field was left out), or the line naming
/// the field and the choices.
fn one_of<T: Copy>(
    field: &str,
    given: Option<&str>,
    all: &[T],
    name: fn(T) -> &'static str,
) -> Result<Option<T>, String> {
    let Some(given) = given else {
        return Ok(None);
    };
    let found = all.iter().copied().find(|&x| name(x) == given);
    found.map(Some).ok_or_else(|| {
        let choices = words(all.iter().map(|&x| name(x)));
        format!("goal: {field} = \"{given}\" is unknown; use {choices}")
    })
}

fn words<'a>(w: impl Iterator<Item = &'a str>) -> String {
    w.collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(toml_text: &str) -> Result<Goal, String> {
        toml::from_str::<RawGoal>(toml_text)
            .map_err(|e| e.to_string())?
            .parse()
    }

    fn power_loss(who: Who, phase: Phase, with: Vec<With>) -> Situation {
        Situation {
            kind: FaultKind::PowerLoss,
            who,
            phase,
            with,
        }
    }

    #[test]
    fn a_goal_matches_only_the_situations_it_names() {
        let g = raw(
            "kind = \"power-loss\"\nwho = \"quorum\"\nphase = \"after-ack\"\nwith = [\"leader-cut\"]",
        )
        .unwrap();
        let cut = vec![With::LeaderCut, With::Fault(FaultKind::Partition)];
        assert!(g.met_by(&power_loss(Who::Quorum, Phase::AfterAck, cut.clone())));
        assert!(!g.met_by(&power_loss(Who::Quorum, Phase::AfterAck, vec![])));
        assert!(!g.met_by(&power_loss(Who::Leader, Phase::AfterAck, cut.clone())));
        assert!(!g.met_by(&power_loss(Who::Quorum, Phase::Electing, cut.clone())));
        assert!(g.reachable(true));
        // Without client writes there is no ACK to land after.
        assert!(!g.reachable(false));
        assert_eq!(
            g.label(),
            "power-loss · quorum · after an ACK · with leader cut off"
        );
    }

    #[test]
    fn a_bad_goal_names_the_field_and_the_choices() {
        let e = raw("kind = \"kill\"\nphase = \"after an ACK\"").unwrap_err();
        assert!(
            e.contains("phase = \"after an ACK\"") && e.contains("after-ack"),
            "{e}"
        );
        let e = raw("kind = \"kill\"\nwho = \"boss\"").unwrap_err();
        assert!(e.contains("who = \"boss\"") && e.contains("quorum"), "{e}");
        let e = raw("kind = \"kill\"\nwith = [\"rain\"]").unwrap_err();
        assert!(e.contains("with = \"rain\""), "{e}");
        assert!(raw("kind = \"kill\"\nwhom = \"leader\"").is_err());
    }

    #[test]
    fn phase_keys_are_the_names_results_json_uses() {
        for p in Phase::ALL {
            assert_eq!(serde_json::to_value(p).unwrap(), p.key());
        }
    }
}

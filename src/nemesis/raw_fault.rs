//! One `[[fault]]` table (or `[[fault.with]]` part, or a timed `[[step]]`'s fault keys) as
//! written in TOML, and its checked `FaultTemplate`: every key's value parsed, every mistake
//! one line naming the key and the fix.

use super::faults;
use super::schedule::{
    default_template, kind_names, listed, FaultKind, FaultTemplate, PartitionShape, TargetSpec,
};
use super::timing::Timing;
use super::trigger::Trigger;
use super::units::parse_duration;
use serde::Deserialize;
use std::time::Duration;

/// A table's keys as written. The keys only some kinds take (`faults::KIND_KEYS`) are public:
/// each kind's file reads its own (`faults::Fault::read_keys`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFault {
    kind: String,
    target: Option<String>,
    shape: Option<String>,
    /// Partition shape "groups": the groups, e.g. [["n1", "n2"], ["n3", "n4"]].
    groups: Option<Vec<Vec<String>>>,
    /// Clock: "bump" | "strobe" | "rate"; packet: "loss" | "delay" | "duplicate" | "reorder" |
    /// "bandwidth"; frames: "truncated" | "garbage".
    pub mode: Option<String>,
    /// Clock: "+300s", "-2m", "500ms"; bump without a sign picks one from the seed.
    pub delta: Option<String>,
    /// Clock strobe: how often to flip.
    pub period: Option<String>,
    /// Clock rate: how fast the clock runs.
    pub factor: Option<f64>,
    /// Packet loss, duplicate, reorder: the share of packets, 0-100.
    pub percent: Option<f64>,
    /// Packet delay, reorder: how long a held packet waits ("100ms").
    pub delay: Option<String>,
    /// Packet delay: +/- this much, uniformly, per packet ("20ms").
    pub jitter: Option<String>,
    /// Packet bandwidth: "256kbit", "1mbit".
    pub rate: Option<String>,
    /// Corrupt: which data file ("txnlog", "acceptedEpoch", "currentEpoch").
    pub file: Option<String>,
    /// Reconfig: "observer" demotes the servers instead of removing them; "participant"
    /// promotes observers to voters.
    pub role: Option<String>,
    /// Reconfig: the removed servers are replaced (killed, their data wiped, started afresh)
    /// before the undo adds them back.
    pub replace: Option<bool>,
    duration: Option<String>,
    weight: Option<u32>,
    /// Aimed: a `Trigger` name ("election", "new-leader", ...).
    when: Option<String>,
    /// How long a triggered fault waits for its observation.
    wait: Option<String>,
    /// Whose reads may fire the trigger: a target ("followers-high", "n1,n2").
    watch: Option<String>,
    /// Composed: `[[fault.with]]` tables, faults started with this one.
    #[serde(default)]
    with: Vec<RawFault>,
    /// In a `[[fault.with]]`: how long after the main fault's start it begins.
    after: Option<String>,
    /// The composed group's name.
    compose: Option<String>,
    /// Partition: "quorum" cuts only the Zab connections (the election ones pass).
    pub port: Option<String>,
    /// How this fault's own duration is drawn ("fixed" | "exponential" | "jittered"); the
    /// schedule's `timing` by default.
    timing: Option<String>,
    /// The least quiet after its span before the next fault ("6s").
    quiet_after: Option<String>,
    /// `[fault.goal]`: the situation the entry is there to meet.
    goal: Option<super::goal::RawGoal>,
}

impl RawFault {
    /// The checked template: each group of keys in a step of its own (where; what this kind
    /// takes; how long and how often; the aim; the composed parts), each mistake one line
    /// naming the key and the fix.
    pub(super) fn into_template(self) -> Result<FaultTemplate, String> {
        let kind = FaultKind::parse(&self.kind)
            .ok_or_else(|| format!("kind = \"{}\" is unknown; use {}", self.kind, kind_names()))?;
        let fault = faults::of(kind);
        if let Some(key) = (self.kind_keys_given().into_iter()).find(|k| !fault.keys().contains(k))
        {
            return Err(faults::only_for(key));
        }
        let mut t = default_template(kind);
        self.where_keys(&mut t)?;
        fault.read_keys(&self, &mut t)?;
        self.how_long_keys(&mut t)?;
        self.aim_keys(&mut t)?;
        if self.after.is_some() {
            return Err("after is only for a composed part ([[fault.with]])".into());
        }
        if self.compose.is_some() && self.with.is_empty() {
            return Err("compose names a group of faults: add [[fault.with]] tables".into());
        }
        t.compose = self.compose;
        t.goal = self.goal.map(super::goal::RawGoal::parse).transpose()?;
        for part in self.with {
            let p = part.into_part(&t)?;
            t.with.push(p);
        }
        Ok(t)
    }

    /// target, shape, groups.
    fn where_keys(&self, t: &mut FaultTemplate) -> Result<(), String> {
        if let Some(target) = &self.target {
            t.target = TargetSpec::parse(target).ok_or_else(|| {
                format!("target = \"{target}\" is unknown; use leader, follower, random, minority, majority, all, highest, followers, followers-low, followers-high, trigger, main or others (composed parts), or node names like \"n1,n2\"")
            })?;
        }
        if let Some(shape) = &self.shape {
            t.shape = Some(PartitionShape::parse(shape).ok_or_else(|| {
                let names = listed(&PartitionShape::ALL, PartitionShape::name);
                format!("shape = \"{shape}\" is unknown; use one of {names}")
            })?);
        }
        match (&self.groups, t.shape) {
            (Some(groups), Some(PartitionShape::Groups)) => {
                let mut seen = std::collections::BTreeSet::new();
                for name in groups.iter().flatten() {
                    if crate::history::sid_of(name).is_none() {
                        return Err(format!("groups: '{name}' is not a node name like n1"));
                    }
                    if !seen.insert(name) {
                        return Err(format!("groups: {name} is in two groups"));
                    }
                }
                t.groups = Some(groups.clone());
            }
            (None, Some(PartitionShape::Groups)) => {
                return Err(
                    "shape = \"groups\" needs groups = [[\"n1\", \"n2\"], [\"n3\", \"n4\"]]".into(),
                )
            }
            (Some(_), _) => return Err("groups is only for shape = \"groups\"".into()),
            (None, _) => {}
        }
        Ok(())
    }

    /// The keys set in this table that only some kinds take (`faults::KIND_KEYS`).
    fn kind_keys_given(&self) -> Vec<&'static str> {
        let given = [
            ("shape", self.shape.is_some()),
            ("port", self.port.is_some()),
            ("mode", self.mode.is_some()),
            ("delta", self.delta.is_some()),
            ("period", self.period.is_some()),
            ("factor", self.factor.is_some()),
            ("percent", self.percent.is_some()),
            ("delay", self.delay.is_some()),
            ("jitter", self.jitter.is_some()),
            ("rate", self.rate.is_some()),
            ("file", self.file.is_some()),
            ("role", self.role.is_some()),
            ("replace", self.replace.is_some()),
        ];
        given
            .into_iter()
            .filter(|(_, set)| *set)
            .map(|(key, _)| key)
            .collect()
    }

    /// timing, quiet_after, duration, weight.
    fn how_long_keys(&self, t: &mut FaultTemplate) -> Result<(), String> {
        if let Some(timing) = &self.timing {
            t.duration_timing = Some(Timing::parse(timing).ok_or_else(|| {
                let names = listed(&Timing::ALL, Timing::name);
                format!("timing = \"{timing}\" is unknown; use {names}")
            })?);
        }
        if let Some(q) = &self.quiet_after {
            t.quiet_after = parse_duration(q).map_err(|e| format!("quiet_after: {e}"))?;
        }
        if let Some(d) = &self.duration {
            t.duration = Some(parse_duration(d).map_err(|e| format!("duration: {e}"))?);
        }
        if let Some(w) = self.weight {
            if w == 0 {
                return Err(
                    "weight = 0 would never pick this fault; remove the table instead".into(),
                );
            }
            t.weight = w;
        }
        Ok(())
    }

    /// when, wait, watch, and a trigger target.
    fn aim_keys(&self, t: &mut FaultTemplate) -> Result<(), String> {
        if let Some(w) = &self.when {
            t.when = Some(Trigger::parse(w).ok_or_else(|| {
                let names = listed(&Trigger::ALL, Trigger::name);
                format!("when = \"{w}\" is unknown; use {names}")
            })?);
        }
        if let Some(w) = &self.wait {
            if t.when.is_none() {
                return Err("wait is only for a triggered fault (when = ...)".into());
            }
            t.wait = Some(parse_duration(w).map_err(|e| format!("wait: {e}"))?);
        }
        if let Some(w) = &self.watch {
            if t.when.is_none() {
                return Err("watch is only for a triggered fault (when = ...)".into());
            }
            t.watch = match TargetSpec::parse(w) {
                Some(TargetSpec::Trigger) | None => {
                    return Err(format!("watch = \"{w}\" is not a set of nodes to watch; use a target such as leader, followers-high, main (composed parts) or node names like \"n1,n2\""));
                }
                spec => spec,
            };
        }
        if t.target == TargetSpec::Trigger && t.when.is_none() {
            return Err("target = \"trigger\" needs when = \"election\" (or another trigger): it is the node the observation names".into());
        }
        Ok(())
    }

    /// A `[[fault.with]]` part of `main`, checked as a part: no keys of a whole entry, its
    /// `after`, and a `target = "trigger"` that names the main fault's observation.
    fn into_part(self, main: &FaultTemplate) -> Result<FaultTemplate, String> {
        let part = self;
        let t = main;
        if !part.with.is_empty()
            || part.compose.is_some()
            || part.weight.is_some()
            || part.goal.is_some()
        {
            return Err(
                "a [[fault.with]] part takes no with, compose, weight or goal of its own".into(),
            );
        }
        if part.timing.is_some() {
            return Err(
                "with: timing is for a [[fault]]'s own duration; a part's is never drawn".into(),
            );
        }
        if part.quiet_after.is_some() {
            return Err(
                "with: quiet_after is for the [[fault]]: the quiet follows the whole group".into(),
            );
        }
        let after = match &part.after {
            Some(a) => parse_duration(a).map_err(|e| format!("with: after: {e}"))?,
            None => Duration::ZERO,
        };
        // A part with its own `when` waits from its `after` for its observation (and may
        // hit the node that names, `target = "trigger"`); the others fire at `after`.
        let own_trigger = part.when.is_some();
        let mut raw = part;
        raw.after = None;
        // A part may hit the node the main fault's trigger names.
        let at_trigger = !own_trigger && raw.target.as_deref() == Some("trigger");
        if at_trigger {
            if t.when.is_none() {
                return Err("with: target = \"trigger\" needs when = ... on the main fault".into());
            }
            raw.target = None;
        }
        let mut p = raw.into_template().map_err(|e| format!("with: {e}"))?;
        if at_trigger {
            p.target = TargetSpec::Trigger;
        }
        p.after = after;
        if let (Some(wait), Some(d)) = (p.wait.filter(|_| own_trigger), p.duration) {
            if wait >= d {
                return Err(format!(
                    "with: wait ({wait:?}) must be shorter than the part's duration ({d:?}): a triggered part is undone at after + duration, fired or not"
                ));
            }
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::RawFault;
    use crate::nemesis::faults::KIND_KEYS;

    /// Every key only some kinds take is checked against the kind (a key missing from
    /// `kind_keys_given` would be read by its kind without the check).
    #[test]
    fn every_kind_key_a_table_can_give_is_checked_against_its_kind() {
        let every = r#"kind = "clock"
shape = "halves"
port = "quorum"
mode = "bump"
delta = "+1s"
period = "1s"
factor = 2.0
percent = 10.0
delay = "1ms"
jitter = "1ms"
rate = "1mbit"
file = "txnlog"
role = "observer"
replace = true
"#;
        let raw: RawFault = toml::from_str(every).unwrap();
        let step_only = ["drops", "links"];
        let table_keys: Vec<&str> = (KIND_KEYS.iter().copied())
            .filter(|k| !step_only.contains(k))
            .collect();
        assert_eq!(raw.kind_keys_given(), table_keys);
    }
}

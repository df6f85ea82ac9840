//! One `[[fault]]` table (or `[[fault.with]]` part, or a timed `[[step]]`'s fault keys) as
//! written in TOML, and its checked `FaultTemplate`: every key's value parsed, every mistake
//! one line naming the key and the fix.

use super::schedule::{
    default_template, kind_names, listed, ClockMode, FaultKind, FaultTemplate, FrameMode,
    PacketMode, PartitionShape, TargetSpec, CORRUPT_FILES,
};
use super::timing::Timing;
use super::trigger::Trigger;
use super::units::{parse_duration, parse_rate_kbit, parse_signed_ms};
use crate::control::fault::iptables::Cut;
use serde::Deserialize;
use std::time::Duration;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFault {
    kind: String,
    target: Option<String>,
    shape: Option<String>,
    /// Partition shape "groups": the groups, e.g. [["n1", "n2"], ["n3", "n4"]].
    groups: Option<Vec<Vec<String>>>,
    /// Clock: "bump" | "strobe" | "rate"; packet: "loss" | "delay" | "duplicate" | "reorder" |
    /// "bandwidth"; frames: "truncated" | "garbage".
    mode: Option<String>,
    /// Clock: "+300s", "-2m", "500ms"; bump without a sign picks one from the seed.
    delta: Option<String>,
    /// Clock strobe: how often to flip.
    period: Option<String>,
    /// Clock rate: how fast the clock runs.
    factor: Option<f64>,
    /// Packet loss, duplicate, reorder: the share of packets, 0-100.
    percent: Option<f64>,
    /// Packet delay, reorder: how long a held packet waits ("100ms").
    delay: Option<String>,
    /// Packet delay: +/- this much, uniformly, per packet ("20ms").
    jitter: Option<String>,
    /// Packet bandwidth: "256kbit", "1mbit".
    rate: Option<String>,
    /// Corrupt: which data file ("txnlog", "acceptedEpoch", "currentEpoch").
    file: Option<String>,
    /// Reconfig: "observer" demotes the servers instead of removing them; "participant"
    /// promotes observers to voters.
    role: Option<String>,
    /// Reconfig: the removed servers are replaced (killed, their data wiped, started afresh)
    /// before the undo adds them back.
    replace: Option<bool>,
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
    port: Option<String>,
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
        let mut t = default_template(kind);
        self.where_keys(&mut t)?;
        self.kind_keys(&mut t)?;
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
        let kind = t.kind;
        if let Some(target) = &self.target {
            t.target = TargetSpec::parse(target).ok_or_else(|| {
                format!("target = \"{target}\" is unknown; use leader, follower, random, minority, majority, all, highest, followers, followers-low, followers-high, trigger, main or others (composed parts), or node names like \"n1,n2\"")
            })?;
        }
        if let Some(shape) = &self.shape {
            if kind != FaultKind::Partition && kind != FaultKind::Packet {
                return Err("shape is only for kind = \"partition\" or \"packet\"".into());
            }
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

    /// port, the clock, packet and frames keys, file, role and replace: each only for its kind.
    fn kind_keys(&self, t: &mut FaultTemplate) -> Result<(), String> {
        let kind = t.kind;
        if let Some(port) = &self.port {
            if kind != FaultKind::Partition {
                return Err("port is only for kind = \"partition\"".into());
            }
            t.cut = Cut::of_port(Some(port)).ok_or_else(|| format!("port = \"{port}\" is unknown; use \"quorum\" (only the Zab connections are cut) or leave it out (every packet)"))?;
        }
        let clock_keys = self.delta.is_some() || self.period.is_some() || self.factor.is_some();
        if clock_keys && kind != FaultKind::Clock {
            return Err("delta, period and factor are only for kind = \"clock\"".into());
        }
        let packet_keys = self.percent.is_some()
            || self.delay.is_some()
            || self.jitter.is_some()
            || self.rate.is_some();
        if packet_keys && kind != FaultKind::Packet {
            return Err("percent, delay, jitter and rate are only for kind = \"packet\"".into());
        }
        if self.mode.is_some()
            && kind != FaultKind::Clock
            && kind != FaultKind::Packet
            && kind != FaultKind::Frames
        {
            return Err("mode is only for kind = \"clock\", \"packet\" or \"frames\"".into());
        }
        if kind == FaultKind::Frames {
            if let Some(m) = &self.mode {
                t.frames = Some(FrameMode::parse(m).ok_or_else(|| {
                    format!(
                        "mode = \"{m}\" is unknown for kind = \"frames\"; use truncated or garbage"
                    )
                })?);
            }
        }
        if kind == FaultKind::Clock {
            t.clock = Some(self.clock_mode()?);
        }
        if kind == FaultKind::Packet {
            t.packet = Some(self.packet_mode()?);
        }
        if let Some(file) = &self.file {
            if kind != FaultKind::Corrupt {
                return Err("file is only for kind = \"corrupt\"".into());
            }
            if !CORRUPT_FILES.contains(&file.as_str()) {
                return Err(format!(
                    "file = \"{file}\" is unknown; use one of {}",
                    CORRUPT_FILES.join(", ")
                ));
            }
            t.file = Some(file.clone());
        }
        if let Some(role) = &self.role {
            if kind != FaultKind::Reconfig {
                return Err("role is only for kind = \"reconfig\"".into());
            }
            match role.as_str() {
                crate::history::OBSERVER_ROLE => t.demote = true,
                crate::history::PARTICIPANT_ROLE => t.promote = true,
                _ => return Err(format!("role = \"{role}\" is unknown; use \"observer\" (voters demoted, they stay as observers), \"participant\" (observers promoted to voters) or leave it out (the servers leave the config)")),
            }
        }
        if let Some(replace) = self.replace {
            if kind != FaultKind::Reconfig {
                return Err("replace is only for kind = \"reconfig\"".into());
            }
            if replace && (t.demote || t.promote) {
                return Err("replace = true and role do not go together: a replaced server leaves the config; drop one of them".into());
            }
            t.replace = replace;
        }
        Ok(())
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

    fn packet_mode(&self) -> Result<PacketMode, String> {
        let mode = self.mode.as_deref().unwrap_or("loss");
        let percent = |default: f64| -> Result<f64, String> {
            let p = self.percent.unwrap_or(default);
            if !(p > 0.0 && p <= 100.0) {
                return Err(format!(
                    "percent = {p}: use a number above 0 and at most 100"
                ));
            }
            Ok(p)
        };
        let ms = |key: &str, value: &Option<String>, default: &str| -> Result<u64, String> {
            let d = parse_duration(value.as_deref().unwrap_or(default))
                .map_err(|e| format!("{key}: {e}"))?;
            Ok(d.as_millis() as u64)
        };
        let unused = |keys: &[(&str, bool)]| -> Result<(), String> {
            match keys.iter().find(|(_, set)| *set) {
                Some((key, _)) => Err(format!("{key} does not apply to mode = \"{mode}\"")),
                None => Ok(()),
            }
        };
        let (percent_set, delay_set) = (self.percent.is_some(), self.delay.is_some());
        let (jitter_set, rate_set) = (self.jitter.is_some(), self.rate.is_some());
        let m = match mode {
            "loss" => {
                unused(&[
                    ("delay", delay_set),
                    ("jitter", jitter_set),
                    ("rate", rate_set),
                ])?;
                PacketMode::Loss {
                    percent: percent(30.0)?,
                }
            }
            "delay" => {
                unused(&[("percent", percent_set), ("rate", rate_set)])?;
                let delay_ms = ms("delay", &self.delay, "100ms")?;
                let jitter_ms = ms("jitter", &self.jitter, "0ms")?;
                if delay_ms == 0 || jitter_ms > delay_ms {
                    return Err(format!(
                        "delay {delay_ms} ms, jitter {jitter_ms} ms: use a delay above 0 and a \
                         jitter at most the delay"
                    ));
                }
                PacketMode::Delay {
                    delay_ms,
                    jitter_ms,
                }
            }
            "duplicate" => {
                unused(&[
                    ("delay", delay_set),
                    ("jitter", jitter_set),
                    ("rate", rate_set),
                ])?;
                PacketMode::Duplicate {
                    percent: percent(20.0)?,
                }
            }
            "reorder" => {
                unused(&[("jitter", jitter_set), ("rate", rate_set)])?;
                let delay_ms = ms("delay", &self.delay, "50ms")?;
                if delay_ms == 0 {
                    return Err("delay = 0: a reordered packet must wait; use e.g. 50ms".into());
                }
                PacketMode::Reorder {
                    percent: percent(25.0)?,
                    delay_ms,
                }
            }
            "bandwidth" => {
                unused(&[
                    ("percent", percent_set),
                    ("delay", delay_set),
                    ("jitter", jitter_set),
                ])?;
                let text = self.rate.as_deref().unwrap_or("1mbit");
                PacketMode::Bandwidth {
                    rate_kbit: parse_rate_kbit(text).map_err(|e| format!("rate: {e}"))?,
                }
            }
            other => {
                return Err(format!(
                    "mode = \"{other}\" is unknown for kind = \"packet\"; use loss, delay, \
                     duplicate, reorder or bandwidth"
                ))
            }
        };
        Ok(m)
    }

    fn clock_mode(&self) -> Result<ClockMode, String> {
        let delta = |default: &str| -> Result<(i64, bool), String> {
            let text = self.delta.as_deref().unwrap_or(default);
            let signed = text.starts_with('+') || text.starts_with('-');
            let ms = parse_signed_ms(text).map_err(|e| format!("delta: {e}"))?;
            Ok((ms, !signed))
        };
        match self.mode.as_deref().unwrap_or("bump") {
            "bump" => {
                let (delta_ms, random_sign) = delta("60s")?;
                Ok(ClockMode::Bump {
                    delta_ms,
                    random_sign,
                })
            }
            "strobe" => {
                let (delta_ms, _) = delta("+10s")?;
                let period = parse_duration(self.period.as_deref().unwrap_or("200ms"))
                    .map_err(|e| format!("period: {e}"))?;
                Ok(ClockMode::Strobe {
                    delta_ms,
                    period_ms: period.as_millis().max(10) as u64,
                })
            }
            "rate" => {
                let factor = self.factor.unwrap_or(2.0);
                if !(factor > 0.0 && factor <= 1000.0) {
                    return Err(format!(
                        "factor = {factor}: use a number above 0 and at most 1000"
                    ));
                }
                Ok(ClockMode::Rate { factor })
            }
            other => Err(format!(
                "mode = \"{other}\" is unknown; use bump, strobe or rate"
            )),
        }
    }
}

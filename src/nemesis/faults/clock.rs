//! Clock: the target nodes' wall clocks stepped (bump), flipped between an offset and +0
//! (strobe) or run fast (rate), through libfaketime or the hosts' own clocks
//! (`--real-clock-skew`); undone by a clock `reset` to +0.

use super::kill::undo_value;
use super::{
    names_its_nodes, record_undo, single, target_line, Active, Fault, Needs, Order, RecordedStart,
    Replayed, SimWorld, StepKeys,
};
use crate::control::fault::clock::{Clock as MovableClock, ClockChange, ClockSetting};
use crate::history::{sid_of, EventType, FaultKind, F, NEMESIS};
use crate::nemesis::raw_fault::RawFault;
use crate::nemesis::schedule::{ClockMode, FaultTemplate, PlannedFault};
use crate::nemesis::seam::NemesisContext;
use crate::nemesis::timed::secs;
use crate::nemesis::units::{parse_duration, parse_signed_ms};
use anyhow::{anyhow, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

pub struct Clock;

/// A clock fault's mode when the schedule names none.
const DEFAULT_MODE: ClockMode = ClockMode::Bump {
    delta_ms: 60_000,
    random_sign: true,
};

/// What a clock fault sets, read from the planned fault as both worlds do it.
#[derive(Debug, Clone, Copy)]
enum Setting {
    Offset(i64),
    Strobe { offset: i64, period_ms: u64 },
    Rate(f64),
}

/// A strobed clock in force on a real cluster: its offset and how often it flips (the runner
/// flips it while the fault holds).
#[derive(Debug, Clone, Copy)]
pub struct Strobe {
    pub delta_ms: i64,
    pub period: Duration,
}

impl Fault for Clock {
    fn kind(&self) -> FaultKind {
        FaultKind::Clock
    }

    fn needs(&self) -> Needs {
        Needs {
            clock: true,
            ..Needs::default()
        }
    }

    fn apply(&self, ctx: &NemesisContext, order: &Order) -> Result<Active> {
        let clock = clock_of(ctx)?;
        let nodes = order.nodes();
        let set = setting(order);
        let mut value = order.base.clone();
        describe(&mut value, set);
        let mechanism = clock.mechanism();
        value["mechanism"] = json!(mechanism.name());
        ctx.recorder.record(
            NEMESIS,
            EventType::Invoke,
            F::Clock,
            single(nodes),
            value.clone(),
        );
        let real = match set {
            Setting::Offset(ms) | Setting::Strobe { offset: ms, .. } => ClockSetting::Offset(ms),
            Setting::Rate(factor) => ClockSetting::Rate(factor),
        };
        let mut done = BTreeMap::new();
        for node in nodes {
            done.insert(node.clone(), clock.set(node, real)?);
        }
        value[mechanism.changes_field()] = json!(done);
        ctx.recorder
            .record(NEMESIS, EventType::Info, F::Clock, single(nodes), value);
        let active = Active::new(self.kind(), nodes.to_vec());
        Ok(match set {
            Setting::Strobe { offset, period_ms } => active.holding(Strobe {
                delta_ms: offset,
                period: Duration::from_millis(period_ms),
            }),
            _ => active,
        })
    }

    fn undo(&self, ctx: &NemesisContext, active: &Active) {
        reset_clocks(ctx, &active.nodes, false)
    }

    fn heal_all(&self, ctx: &NemesisContext, nodes: &[String]) {
        reset_clocks(ctx, nodes, true);
    }

    fn apply_sim(
        &self,
        w: &mut dyn SimWorld,
        order: &Order,
        _: u64,
        value: &mut Value,
    ) -> Vec<String> {
        let set = setting(order);
        describe(value, set);
        let since = w.now();
        let skew = match set {
            Setting::Offset(ms) => ClockSkew::Offset(ms),
            Setting::Strobe { offset, period_ms } => ClockSkew::Strobe {
                offset,
                period_ms,
                since,
            },
            Setting::Rate(factor) => ClockSkew::Rate { factor, since },
        };
        for s in order.nodes().iter().filter_map(|n| sid_of(n)) {
            w.set_clock(s, Some(skew));
        }
        order.nodes().to_vec()
    }

    fn undo_sim(&self, w: &mut dyn SimWorld, nodes: &[String], _: u64) {
        for s in nodes.iter().filter_map(|n| sid_of(n)) {
            w.set_clock(s, None);
        }
    }

    fn keys(&self) -> &'static [&'static str] {
        &["mode", "delta", "period", "factor"]
    }

    fn defaults(&self, t: &mut FaultTemplate) {
        t.clock = Some(DEFAULT_MODE);
    }

    fn read_keys(&self, raw: &RawFault, t: &mut FaultTemplate) -> Result<(), String> {
        t.clock = Some(mode_of(raw)?);
        Ok(())
    }

    /// Named nodes, and a bump's sign written: a step is replayed exactly, never drawn.
    fn exact_step(&self, t: &mut FaultTemplate, _: &StepKeys) -> Result<(), String> {
        names_its_nodes(t)?;
        if let Some(ClockMode::Bump {
            random_sign: true, ..
        }) = t.clock
        {
            return Err(
                "delta needs a sign (\"+60s\" or \"-60s\"): a step is replayed exactly, never \
                 with a drawn sign"
                    .into(),
            );
        }
        Ok(())
    }

    fn step_lines(&self, s: &PlannedFault) -> String {
        let mut out = target_line(&s.template);
        out.push_str(&match s.template.clock {
            Some(ClockMode::Bump { delta_ms, .. }) => format!(
                "mode = \"bump\"\ndelta = \"{}\"\n",
                signed_secs(s.clock_delta_ms.unwrap_or(delta_ms))
            ),
            Some(ClockMode::Strobe {
                delta_ms,
                period_ms,
            }) => format!(
                "mode = \"strobe\"\ndelta = \"{}\"\nperiod = \"{period_ms}ms\"\n",
                signed_secs(delta_ms)
            ),
            Some(ClockMode::Rate { factor }) => format!("mode = \"rate\"\nfactor = {factor:?}\n"),
            None => String::new(),
        });
        out
    }

    /// The mode and offset its start recorded (a bump's sign as it was drawn).
    fn replayed(&self, mut t: FaultTemplate, start: &RecordedStart) -> Replayed {
        let v = start.value;
        let offset = v.offset_ms.unwrap_or(0);
        t.clock = Some(match v.mode.as_deref() {
            Some("strobe") => ClockMode::Strobe {
                delta_ms: offset,
                period_ms: v.period_ms.unwrap_or(200),
            },
            Some("rate") => ClockMode::Rate {
                factor: v.factor.unwrap_or(1.0),
            },
            _ => ClockMode::Bump {
                delta_ms: offset,
                random_sign: false,
            },
        });
        Ok(Some(t))
    }
}

/// `+60s`, `-2.5s`: a signed offset as a step writes it.
fn signed_secs(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "+" };
    format!("{sign}{}", secs(Duration::from_millis(ms.unsigned_abs())))
}

/// The planned fault's setting: a bump's offset is the plan's drawn delta (its sign drawn).
fn setting(order: &Order) -> Setting {
    match order.fault.template.clock.unwrap_or(DEFAULT_MODE) {
        ClockMode::Bump { delta_ms, .. } => {
            Setting::Offset(order.fault.clock_delta_ms.unwrap_or(delta_ms))
        }
        ClockMode::Strobe {
            delta_ms,
            period_ms,
        } => Setting::Strobe {
            offset: delta_ms,
            period_ms,
        },
        ClockMode::Rate { factor } => Setting::Rate(factor),
    }
}

/// The clock fault's fields of its value: `mode` and its figures.
fn describe(value: &mut Value, set: Setting) {
    match set {
        Setting::Offset(ms) => {
            value["mode"] = json!("bump");
            value["offset_ms"] = json!(ms);
        }
        Setting::Strobe { offset, period_ms } => {
            value["mode"] = json!("strobe");
            value["offset_ms"] = json!(offset);
            value["period_ms"] = json!(period_ms);
        }
        Setting::Rate(factor) => {
            value["mode"] = json!("rate");
            value["factor"] = json!(factor);
        }
    }
}

/// The cluster's clock: the hosts' own (`--real-clock-skew`) or the nodes' libfaketime files.
pub fn clock_of(ctx: &NemesisContext) -> Result<&dyn MovableClock> {
    ctx.target.clock().ok_or_else(|| {
        anyhow!(
            "the nodes' clocks cannot be moved: they do not run under libfaketime, and the hosts' \
             clocks may not be stepped (--ssh --real-clock-skew)"
        )
    })
}

/// Puts `setting` in force on `node`'s clock; returns what was done.
pub fn set_clock(ctx: &NemesisContext, node: &str, setting: ClockSetting) -> Result<ClockChange> {
    clock_of(ctx)?.set(node, setting)
}

/// Sets `nodes`' clocks back to +0 and records it.
pub fn reset_clocks(ctx: &NemesisContext, nodes: &[String], last: bool) {
    let mut value = undo_value(FaultKind::Clock, nodes);
    if let Some(clock) = ctx.target.clock() {
        value["mechanism"] = json!(clock.mechanism().name());
    }
    record_undo(ctx, F::Clock, single(nodes), value, last, || {
        let mut errors = BTreeMap::new();
        for node in nodes {
            if let Err(e) = set_clock(ctx, node, ClockSetting::Offset(0)) {
                errors.insert(node.clone(), format!("{e:#}"));
            }
        }
        errors
    });
}

/// A simulated node's wall clock under a clock fault.
#[derive(Debug, Clone, Copy)]
pub enum ClockSkew {
    Offset(i64),
    Strobe {
        offset: i64,
        period_ms: u64,
        since: u64,
    },
    Rate {
        factor: f64,
        since: u64,
    },
}

impl ClockSkew {
    /// How far the clock is from true time at `now` (virtual ns), in ms.
    pub fn offset_ms(&self, now: u64) -> i64 {
        match *self {
            ClockSkew::Offset(ms) => ms,
            ClockSkew::Strobe {
                offset,
                period_ms,
                since,
            } => {
                let flips = (now.saturating_sub(since) / 1_000_000) / period_ms.max(1);
                if flips % 2 == 0 {
                    offset
                } else {
                    0
                }
            }
            ClockSkew::Rate { factor, since } => {
                ((now.saturating_sub(since) as f64 / 1e6) * (factor - 1.0)) as i64
            }
        }
    }
}

/// The clock mode a `[[fault]]` table's keys set (a bump of 60 s, its sign drawn, when it
/// sets none); a bump without a sign draws one from the seed.
fn mode_of(raw: &RawFault) -> Result<ClockMode, String> {
    let delta = |default: &str| -> Result<(i64, bool), String> {
        let text = raw.delta.as_deref().unwrap_or(default);
        let signed = text.starts_with('+') || text.starts_with('-');
        let ms = parse_signed_ms(text).map_err(|e| format!("delta: {e}"))?;
        Ok((ms, !signed))
    };
    match raw.mode.as_deref().unwrap_or("bump") {
        "bump" => {
            let (delta_ms, random_sign) = delta("60s")?;
            Ok(ClockMode::Bump {
                delta_ms,
                random_sign,
            })
        }
        "strobe" => {
            let (delta_ms, _) = delta("+10s")?;
            let period = parse_duration(raw.period.as_deref().unwrap_or("200ms"))
                .map_err(|e| format!("period: {e}"))?;
            Ok(ClockMode::Strobe {
                delta_ms,
                period_ms: period.as_millis().max(10) as u64,
            })
        }
        "rate" => {
            let factor = raw.factor.unwrap_or(2.0);
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

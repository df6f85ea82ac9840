//! A lean parse of one history line: only the fields the report draws from.
//!
//! A 1-hour run holds over a million status reads of ~1 KB each; building a full
//! `serde_json::Value` per line would dominate the render time. `LiteEvent` borrows strings
//! from the line and skips every value field it does not need, and tolerates values of any
//! shape (a value that is not an object simply carries nothing).

use crate::history::{EventType, F};
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::fmt;

/// The fields of an event the report needs.
#[derive(Debug, Deserialize)]
pub struct LiteEvent<'a> {
    pub time: u64,
    #[serde(borrow)]
    pub process: Cow<'a, str>,
    #[serde(rename = "type")]
    pub kind: EventType,
    pub f: F,
    #[serde(default, borrow)]
    pub node: Option<Cow<'a, str>>,
    #[serde(default)]
    pub value: LiteValue,
}

/// The value fields used by the plots: a status read's state, leader, epoch, zxid and wall
/// clock; a write's zxid; whether the value reports an error.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LiteValue {
    pub state: Option<LaneState>,
    pub leader: Option<u64>,
    pub peer_epoch: Option<u64>,
    pub last_zxid: Option<u64>,
    pub wall_clock_ms: Option<i64>,
    pub zxid: Option<u64>,
    pub has_error: bool,
}

/// What a node's lane shows at a moment: its role, or that it could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LaneState {
    Looking,
    Following,
    Leading,
    Observing,
    /// The observer's read failed or timed out: killed, paused, or cut off.
    Down,
}

impl LaneState {
    pub fn name(self) -> &'static str {
        match self {
            LaneState::Looking => "LOOKING",
            LaneState::Following => "FOLLOWING",
            LaneState::Leading => "LEADING",
            LaneState::Observing => "OBSERVING",
            LaneState::Down => "unreachable/down",
        }
    }

    pub fn parse(s: &str) -> Option<LaneState> {
        Self::parse_bytes(s.as_bytes())
    }

    pub fn parse_bytes(s: &[u8]) -> Option<LaneState> {
        match s {
            b"LOOKING" => Some(LaneState::Looking),
            b"FOLLOWING" => Some(LaneState::Following),
            b"LEADING" => Some(LaneState::Leading),
            b"OBSERVING" => Some(LaneState::Observing),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for LiteValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LiteValueVisitor)
    }
}

struct LiteValueVisitor;

/// Numbers that a writer may have put as null: read as None instead of failing the line.
#[derive(Deserialize)]
#[serde(untagged)]
enum MaybeU64 {
    N(u64),
    Other(IgnoredAny),
}

impl MaybeU64 {
    fn get(self) -> Option<u64> {
        match self {
            MaybeU64::N(n) => Some(n),
            MaybeU64::Other(_) => None,
        }
    }
}

impl<'de> Visitor<'de> for LiteValueVisitor {
    type Value = LiteValue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LiteValue, A::Error> {
        let mut v = LiteValue::default();
        while let Some(key) = map.next_key::<Field>()? {
            match key {
                Field::State => v.state = map.next_value::<StateField>()?.0,
                Field::Leader => v.leader = map.next_value::<Option<u64>>()?,
                Field::PeerEpoch => v.peer_epoch = Some(map.next_value()?),
                Field::LastZxid => v.last_zxid = Some(map.next_value()?),
                Field::WallClockMs => v.wall_clock_ms = Some(map.next_value()?),
                Field::Zxid => v.zxid = map.next_value::<MaybeU64>()?.get(),
                Field::Error => {
                    map.next_value::<IgnoredAny>()?;
                    v.has_error = true;
                }
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(v)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LiteValue, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(LiteValue::default())
    }

    fn visit_unit<E>(self) -> Result<LiteValue, E> {
        Ok(LiteValue::default())
    }

    fn visit_bool<E>(self, _: bool) -> Result<LiteValue, E> {
        Ok(LiteValue::default())
    }

    fn visit_i64<E>(self, _: i64) -> Result<LiteValue, E> {
        Ok(LiteValue::default())
    }

    fn visit_u64<E>(self, _: u64) -> Result<LiteValue, E> {
        Ok(LiteValue::default())
    }

    fn visit_f64<E>(self, _: f64) -> Result<LiteValue, E> {
        Ok(LiteValue::default())
    }

    fn visit_str<E>(self, _: &str) -> Result<LiteValue, E> {
        Ok(LiteValue::default())
    }
}

/// A value key, recognised without allocating (a million status reads have ~15 keys each).
enum Field {
    State,
    Leader,
    PeerEpoch,
    LastZxid,
    WallClockMs,
    Zxid,
    Error,
    Other,
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, s: &str) -> Result<Field, E> {
                Ok(match s {
                    "state" => Field::State,
                    "leader" => Field::Leader,
                    "peer_epoch" => Field::PeerEpoch,
                    "last_zxid" => Field::LastZxid,
                    "wall_clock_ms" => Field::WallClockMs,
                    "zxid" => Field::Zxid,
                    "error" => Field::Error,
                    _ => Field::Other,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

/// A status's `state`, read without allocating; unknown states and non-strings are None.
struct StateField(Option<LaneState>);

impl<'de> Deserialize<'de> for StateField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StateField;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a server state")
            }
            fn visit_str<E>(self, s: &str) -> Result<StateField, E> {
                Ok(StateField(LaneState::parse(s)))
            }
            fn visit_unit<E>(self) -> Result<StateField, E> {
                Ok(StateField(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<StateField, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(StateField(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<StateField, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(StateField(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<StateField, E> {
                Ok(StateField(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<StateField, E> {
                Ok(StateField(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<StateField, E> {
                Ok(StateField(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<StateField, E> {
                Ok(StateField(None))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_read_keeps_the_fields_the_plots_need() {
        let line = r#"{"index":3,"time":20000000,"process":"n2","type":"ok","f":"status","node":"n2",
            "value":{"sid":2,"state":"LEADING","leader":2,"peer_epoch":4,"last_zxid":17179869186,
            "wall_clock_ms":1700000000000,"last_election":{"votes":[{"sid":1}]}}}"#;
        let e: LiteEvent = serde_json::from_str(line).unwrap();
        assert_eq!(e.f, F::Status);
        assert_eq!(e.node.as_deref(), Some("n2"));
        assert_eq!(e.value.state, Some(LaneState::Leading));
        assert_eq!(e.value.leader, Some(2));
        assert_eq!(e.value.peer_epoch, Some(4));
        assert_eq!(e.value.last_zxid, Some(17179869186));
        assert!(!e.value.has_error);
    }

    #[test]
    fn values_of_any_shape_are_tolerated() {
        for value in [
            "null",
            "7",
            "\"x\"",
            "[1,[2]]",
            "{\"error\":\"timeout\"}",
            "true",
        ] {
            let line = format!(
                r#"{{"index":0,"time":1,"process":"1","type":"info","f":"write","value":{value}}}"#
            );
            let e: LiteEvent = serde_json::from_str(&line).unwrap();
            assert_eq!(e.value.has_error, value.contains("error"), "{value}");
        }
    }
}

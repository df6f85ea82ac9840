//! One line of `history.jsonl`, decoded: the single decoder every reader goes through.
//!
//! [`decode`] tries the fast byte scanner ([`super::fast`]) and, when it declines (any event
//! other than a plainly laid out status read or write, an escape, a float, a repeated key, a
//! malformed line), uses [`fallback`], serde_json with typed values. The fast path only ever
//! answers for lines the fallback accepts, with the same answer (a property test feeds both
//! mutated lines); so what a line means, and whether it is rejected, is the fallback's
//! decision alone. No `serde_json::Value` is built per status read.

use super::{EventType, FaultValue, InterruptedValue, NodeExitValue, F};
use crate::api::{ServerState, ZabPhase};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// One decoded line, borrowing from the line's text.
#[derive(Debug, Clone, PartialEq)]
pub struct Line<'a> {
    /// The whole line as written (without its newline): what evidence and the report quote.
    pub text: &'a str,
    pub index: u64,
    pub time: u64,
    pub process: Cow<'a, str>,
    pub kind: EventType,
    pub f: F,
    /// The `f` as written (what [`F::Other`] stands for).
    pub f_name: Cow<'a, str>,
    pub node: Option<Cow<'a, str>>,
    pub body: Body<'a>,
}

/// A line's value, typed by what the event is.
#[derive(Debug, Clone, PartialEq)]
pub enum Body<'a> {
    /// A successful status read (`f` status, `type` ok).
    Status(StatusRead<'a>),
    /// A status read that failed or timed out: what the observer knew of the node is stale.
    Unreachable,
    /// A client write's invocation or completion.
    Write(WriteValue<'a>),
    /// A node's final committed log (`f` final-log, `type` ok).
    FinalLog(FinalLogValue),
    /// A final-log read that failed, and why.
    FinalLogError(String),
    /// A nemesis action: a fault or its undo.
    Fault(FaultValue),
    NodeExit(NodeExitValue),
    Interrupted(InterruptedValue),
    /// Anything else (client reads, unknown `f`): the value's raw JSON text ("null" if none).
    Other(&'a str),
}

/// The fields of a status read readers use (`api::NodeStatus` minus what nobody reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusRead<'a> {
    pub state: ServerState,
    pub phase: ZabPhase,
    pub leader: Option<u64>,
    /// currentEpoch.
    pub peer_epoch: u64,
    pub accepted_epoch: u64,
    pub last_zxid: u64,
    pub last_committed_zxid: u64,
    /// The node's wall clock, ms since the Unix epoch (absent in hand-made histories).
    pub wall_clock_ms: Option<i64>,
    /// The raw JSON of `last_election` (an object), None when absent or null. Decode it with
    /// [`election`] (readers do so once per change: it changes once per election).
    pub last_election: Option<&'a str>,
    /// The raw JSON of `config` (an `api::ConfigView`), None when absent or null: a server
    /// reports it once a reconfig changed its config. Decode it with [`config`].
    pub config: Option<&'a str>,
}

impl StatusRead<'_> {
    /// The epoch this server leads, when it has established it: a leader's `peer_epoch` is its
    /// old currentEpoch during discovery and the epoch it leads only from sync on.
    pub fn leads(&self) -> Option<u64> {
        leads(self.state, self.phase, self.peer_epoch)
    }

    /// (leader sid, epoch) this server follows, once its epoch is its leader's: a follower
    /// takes the new currentEpoch at NEWLEADER (inside sync), so only broadcast is certain.
    pub fn follows(&self) -> Option<(u64, u64)> {
        follows(self.state, self.phase, self.leader, self.peer_epoch)
    }
}

/// See [`StatusRead::leads`]; one definition for every status type.
pub fn leads(state: ServerState, phase: ZabPhase, peer_epoch: u64) -> Option<u64> {
    let established = matches!(phase, ZabPhase::Sync | ZabPhase::Broadcast);
    (state == ServerState::Leading && established).then_some(peer_epoch)
}

/// (leader sid, epoch) an observer learns from in broadcast: it rejoined that leader (a
/// settled cluster needs it) but never backs it (a quorum counts voters only).
pub fn observes(
    state: ServerState,
    phase: ZabPhase,
    leader: Option<u64>,
    peer_epoch: u64,
) -> Option<(u64, u64)> {
    (state == ServerState::Observing).then_some(())?;
    in_broadcast(phase, leader, peer_epoch)
}

/// See [`StatusRead::follows`].
pub fn follows(
    state: ServerState,
    phase: ZabPhase,
    leader: Option<u64>,
    peer_epoch: u64,
) -> Option<(u64, u64)> {
    (state == ServerState::Following).then_some(())?;
    in_broadcast(phase, leader, peer_epoch)
}

/// (leader, epoch) of a learner in broadcast under a known leader.
fn in_broadcast(phase: ZabPhase, leader: Option<u64>, peer_epoch: u64) -> Option<(u64, u64)> {
    (phase == ZabPhase::Broadcast).then_some(())?;
    leader.map(|l| (l, peer_epoch))
}

/// A write's `value.value` as canonical JSON text (serde_json's compact form: the key writes
/// and log entries are matched on) and `value.zxid`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WriteValue<'a> {
    pub value: Option<Cow<'a, str>>,
    pub zxid: Option<u64>,
}

/// A final log: (zxid, canonical value) per entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FinalLogValue {
    pub entries: Vec<(u64, String)>,
    pub last_committed_zxid: Option<u64>,
}

/// Why a line is not a history event, and where (1-based column, in bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

/// Decodes one line (without its newline): the fast path, else serde.
pub fn decode(text: &str) -> Result<Line<'_>, LineError> {
    decode_after(text, |_| None)
}

/// [`decode`] given the raw `last_election` of each node's previous read (`previous(node)`):
/// a summary with exactly those bytes was validated already and is not scanned again.
pub fn decode_after<'a, 'p>(
    text: &'a str,
    previous: impl Fn(&[u8]) -> Option<&'p [u8]>,
) -> Result<Line<'a>, LineError> {
    match super::fast::line(text, previous) {
        Some(l) => Ok(l),
        None => fallback(text),
    }
}

/// The canonical text of a JSON value: serde_json's compact form (object keys keep the
/// writer's order, so the same value written twice has the same text).
pub fn canonical(v: &serde_json::Value) -> String {
    v.to_string()
}

/// Decodes a status read's `config`.
pub fn config(raw: &str) -> Result<crate::api::ConfigView, String> {
    serde_json::from_str(raw).map_err(|e| format!("config is not a server's config: {e}"))
}

/// Decodes a status read's `last_election`.
pub fn election(raw: &str) -> Result<crate::api::ElectionSummary, String> {
    serde_json::from_str(raw).map_err(|e| format!("last_election is not an election summary: {e}"))
}

#[derive(Deserialize)]
struct RawLine<'a> {
    index: u64,
    time: u64,
    #[serde(borrow)]
    process: Cow<'a, str>,
    #[serde(rename = "type")]
    kind: EventType,
    #[serde(borrow)]
    f: Cow<'a, str>,
    #[serde(default, borrow)]
    node: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    value: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct StatusFields<'a> {
    state: ServerState,
    leader: Option<u64>,
    peer_epoch: u64,
    // Required: a default would be a guess the checkers then judge (a missing zab_phase read
    // as "election" hides a leader).
    accepted_epoch: u64,
    zab_phase: ZabPhase,
    last_zxid: u64,
    last_committed_zxid: u64,
    #[serde(default)]
    wall_clock_ms: Option<i64>,
    #[serde(default, borrow)]
    last_election: Option<&'a RawValue>,
    #[serde(default, borrow)]
    config: Option<&'a RawValue>,
}

/// serde_json's message without its " at line 1 column N" (the caller names the place).
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// serde_json's decoding of a line: the reference the fast path agrees with.
#[allow(
    clippy::too_many_lines,
    reason = "the reference decoder the fast path is tested against: one arm per kind of line, kept whole to be read beside it"
)]
pub fn fallback(text: &str) -> Result<Line<'_>, LineError> {
    let at_line = |e: serde_json::Error| LineError {
        column: e.column().max(1),
        message: format!("not a history event: {}", without_position(&e)),
    };
    let l: RawLine = serde_json::from_str(text).map_err(at_line)?;
    let raw = l.value.map(|v| v.get()).unwrap_or("null");
    // Errors inside the value point into the line: the value's offset plus serde's column.
    let value_col = l
        .value
        .map(|v| v.get().as_ptr() as usize - text.as_ptr() as usize)
        .unwrap_or(0);
    let in_value = |what: &str, e: serde_json::Error| LineError {
        column: value_col + e.column().max(1),
        message: format!("{what}: {}", without_position(&e)),
    };
    let plain = |what: &str| LineError {
        column: value_col.max(1),
        message: what.to_string(),
    };
    let f = F::parse(&l.f);
    let body = match (f, l.kind) {
        (F::Status, EventType::Ok) => {
            if l.node.is_none() {
                return Err(plain("a status read without \"node\""));
            }
            if l.value.is_none() {
                return Err(plain("a status read without a value"));
            }
            let s: StatusFields =
                serde_json::from_str(raw).map_err(|e| in_value("not a node status", e))?;
            Body::Status(StatusRead {
                state: s.state,
                phase: s.zab_phase,
                leader: s.leader,
                peer_epoch: s.peer_epoch,
                accepted_epoch: s.accepted_epoch,
                last_zxid: s.last_zxid,
                last_committed_zxid: s.last_committed_zxid,
                wall_clock_ms: s.wall_clock_ms,
                last_election: s.last_election.map(|r| r.get()).filter(|r| *r != "null"),
                config: s.config.map(|r| r.get()).filter(|r| *r != "null"),
            })
        }
        (F::Status, _) => Body::Unreachable,
        (F::Write, kind) => {
            let v: serde_json::Value =
                serde_json::from_str(raw).map_err(|e| in_value("not a write", e))?;
            let zxid = match v.get("zxid") {
                None => None,
                Some(z) => Some(z.as_u64().ok_or_else(|| {
                    plain("a write's \"zxid\" is not a non-negative integer (zxid = epoch << 32 | counter)")
                })?),
            };
            let value = v.get("value").filter(|x| !x.is_null());
            if kind == EventType::Ok && (value.is_none() || zxid.is_none()) {
                return Err(plain(
                    "an acknowledged write (type ok) without its \"value\" and \"zxid\"",
                ));
            }
            Body::Write(WriteValue {
                value: value.map(|x| Cow::Owned(canonical(x))),
                zxid,
            })
        }
        (F::FinalLog, kind) => {
            if l.node.is_none() {
                return Err(plain("a final-log event without \"node\""));
            }
            if kind == EventType::Ok {
                let log: crate::api::LogResponse =
                    serde_json::from_str(raw).map_err(|e| in_value("not a final log", e))?;
                Body::FinalLog(FinalLogValue {
                    entries: log
                        .entries
                        .iter()
                        .map(|en| (en.zxid, canonical(&en.value)))
                        .collect(),
                    last_committed_zxid: Some(log.last_committed_zxid),
                })
            } else {
                #[derive(Deserialize)]
                struct Why {
                    error: Option<String>,
                }
                let why = serde_json::from_str::<Option<Why>>(raw)
                    .ok()
                    .flatten()
                    .and_then(|w| w.error);
                Body::FinalLogError(why.unwrap_or_else(|| "no reason given".into()))
            }
        }
        (f, _) if f.is_fault_action() => Body::Fault(if raw == "null" {
            FaultValue::default()
        } else {
            serde_json::from_str(raw).map_err(|e| in_value("not a nemesis value", e))?
        }),
        (F::NodeExit, _) => Body::NodeExit(
            serde_json::from_str(raw).map_err(|e| in_value("not a node-exit value", e))?,
        ),
        (F::Interrupted, _) => Body::Interrupted(
            serde_json::from_str(raw).map_err(|e| in_value("not an interrupted value", e))?,
        ),
        _ => Body::Other(raw),
    };
    Ok(Line {
        text,
        index: l.index,
        time: l.time,
        process: l.process,
        kind: l.kind,
        f,
        f_name: l.f,
        node: l.node,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A status read exactly as the controller writes it (sorted keys, no spaces).
    const STATUS: &str = r#"{"index":7,"time":120000000,"process":"n2","type":"ok","f":"status","node":"n2","value":{"accepted_epoch":3,"election_epoch":4,"last_committed_zxid":12884901890,"last_election":{"leader":2,"peer_epoch":2,"round":4,"took_ms":231,"votes":[{"leader":2,"peer_epoch":2,"sid":1,"zxid":8589934593}],"zxid":8589934593},"last_zxid":12884901890,"last_zxid_hex":"0x300000002","leader":2,"peer_epoch":3,"sid":2,"state":"LEADING","uptime_ms":5,"wall_clock_ms":-3,"zab_phase":"broadcast"}}"#;

    fn samples() -> Vec<String> {
        vec![
            STATUS.to_string(),
            // Another key order, spaces, null election: the general scan.
            r#"{"time":9,"index":1, "f":"status","type":"ok","process":"n1","node":"n1","value":{"sid":1,"state":"LOOKING","leader":null,"peer_epoch":0,"accepted_epoch":0,"zab_phase":"election","election_epoch":1,"last_zxid":0,"last_committed_zxid":0,"wall_clock_ms":1796000000000,"uptime_ms":0,"last_election":null}}"#.into(),
            r#"{"index":3,"time":9,"process":"n2","type":"info","f":"status","node":"n2","value":{"error":"timed out"}}"#.into(),
            r#"{"index":4,"time":10,"process":"0","type":"ok","f":"write","value":{"value":"w1","zxid":12}}"#.into(),
            r#"{"index":5,"time":11,"process":"1","type":"invoke","f":"write","value":{"value":17}}"#.into(),
            r#"{"index":6,"time":12,"process":"final","type":"ok","f":"final-log","node":"n1","value":{"entries":[{"zxid":4294967297,"value":"v1"}],"last_committed_zxid":4294967297}}"#.into(),
            r#"{"index":7,"time":13,"process":"nemesis","type":"info","f":"partition","value":{"nodes":["n5"],"shape":"isolate","drops":{"n5":["n1","n2"]}}}"#.into(),
            r#"{"index":8,"time":14,"process":"n3","type":"info","f":"node-exit","node":"n3","value":{"status":null,"signal":"SIGSEGV","caused_by_controller":false,"log_tail":["boom"]}}"#.into(),
            r#"{"index":9,"time":15,"process":"nemesis","type":"info","f":"power-cut-2","value":{"x":1}}"#.into(),
        ]
    }

    /// The fast path either declines or answers exactly as serde does.
    fn agree(text: &str) -> Result<(), String> {
        let fallback = fallback(text);
        for previous in [None, STATUS.find(r#"{"leader":2,"#).map(|i| &STATUS[i..])] {
            let prev = previous.map(|p| &p[..p.find(r#","last_zxid""#).unwrap_or(p.len())]);
            let fast = super::super::fast::line(text, |_| prev.map(str::as_bytes));
            if let Some(fast) = fast {
                if fallback.as_ref() != Ok(&fast) {
                    return Err(format!("fast {fast:?}\nserde {fallback:?}"));
                }
            }
        }
        // And the decoder, whichever path it took, gives serde's answer.
        let decoded = decode(text);
        match (&decoded, &fallback) {
            (Ok(a), Ok(b)) if a == b => Ok(()),
            (Err(_), Err(_)) => Ok(()),
            _ => Err(format!("decode {decoded:?}\nserde {fallback:?}")),
        }
    }

    #[test]
    fn every_sample_decodes_on_both_paths_alike() {
        for s in samples() {
            fallback(&s).unwrap_or_else(|e| panic!("{e}: {s}"));
            agree(&s).unwrap();
        }
        // The controller's own layout takes the fast path.
        assert!(super::super::fast::line(STATUS, |_| None).is_some());
        assert!(super::super::fast::line(&samples()[3], |_| None).is_some());
        // An unknown f is kept, opaque.
        let all = samples();
        let other = decode(&all[8]).unwrap();
        assert_eq!((other.f, other.f_name.as_ref()), (F::Other, "power-cut-2"));
        assert_eq!(other.body, Body::Other(r#"{"x":1}"#));
    }

    #[test]
    fn the_four_corruptions_the_old_scanner_took_are_rejected() {
        for (from, to) in [
            (r#""uptime_ms":5"#, r#""uptime_ms":1-345"#),
            (r#""election_epoch":4"#, r#""election_epoch":+5"#),
            (
                r#""last_zxid_hex":"0x300000002""#,
                r#""last_zxid_hex":"0x3\x00002""#,
            ),
            (r#""wall_clock_ms":-3"#, r#""wall_clock_ms":1796036e+e"#),
        ] {
            let bad = STATUS.replace(from, to);
            assert_ne!(bad, STATUS);
            assert_eq!(super::super::fast::line(&bad, |_| None), None, "{bad}");
            let err = decode(&bad).unwrap_err();
            assert!(
                err.column > 1 && err.message.contains("not a history event"),
                "{err}"
            );
        }
    }

    #[test]
    fn errors_name_the_column_inside_the_value() {
        let bad = STATUS.replace(r#""state":"LEADING""#, r#""state":"LEADER""#);
        let err = decode(&bad).unwrap_err();
        let at = bad.find("LEADER\"").unwrap();
        assert!(err.column.abs_diff(at) < 12, "{err} vs {at}");
        assert!(err.message.contains("not a node status"), "{err}");
    }

    /// A field the checkers judge by is refused when missing or mistyped, on both paths, never
    /// guessed (a status without zab_phase read as "election" hid a leader).
    #[test]
    fn judged_fields_missing_or_mistyped_are_refused() {
        let write_ok = r#"{"index":4,"time":10,"process":"0","type":"ok","f":"write","value":{"value":"w1","zxid":12}}"#;
        assert!(decode(write_ok).is_ok());
        let mut bad: Vec<String> = [
            "accepted_epoch",
            "zab_phase",
            "last_zxid",
            "last_committed_zxid",
        ]
        .iter()
        .map(|field| {
            let at = STATUS.find(&format!(r#""{field}":"#)).unwrap();
            let end = at + STATUS[at..].find([',', '}']).unwrap();
            // The field and its comma, whichever side the comma is on.
            let (from, to) = if STATUS.as_bytes()[end] == b',' {
                (at, end + 1)
            } else {
                (at - 1, end)
            };
            format!("{}{}", &STATUS[..from], &STATUS[to..])
        })
        .collect();
        bad.push(write_ok.replace(r#""zxid":12"#, r#""zxid":"0xc""#));
        bad.push(write_ok.replace(r#""zxid":12"#, r#""zxid":12.5"#));
        bad.push(write_ok.replace(r#","zxid":12"#, ""));
        bad.push(write_ok.replace(r#""value":"w1","#, ""));
        for b in &bad {
            assert_ne!(b, STATUS);
            assert!(decode(b).is_err(), "decoded: {b}");
            agree(b).unwrap();
        }
    }

    /// Damage like a disk or a bug does: one line mutated.
    #[derive(Debug, Clone)]
    enum Mutation {
        FlipBit(usize, u8),
        Cut(usize),
        Insert(usize, &'static str),
        ReplaceDigitRun(usize, &'static str),
    }

    const JUNK: &[&str] = &[
        "-",
        "+",
        "e",
        "E",
        "e+",
        ".",
        ".5",
        "1-345",
        "+5",
        "1796036e+e",
        "0",
        "00",
        "01",
        "1e400",
        "\\",
        "\\x",
        "\\u12",
        "\\ud800",
        "\\n",
        "\"",
        ",",
        ":",
        "}",
        "]",
        "{",
        "[",
        "null",
        "tru",
        " ",
        "\t",
        "\u{1}",
        "é",
        "\u{7f}",
        "9999999999999999999999",
    ];

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            (any::<usize>(), 0u8..8).prop_map(|(p, b)| Mutation::FlipBit(p, b)),
            any::<usize>().prop_map(Mutation::Cut),
            (any::<usize>(), prop::sample::select(JUNK)).prop_map(|(p, j)| Mutation::Insert(p, j)),
            (any::<usize>(), prop::sample::select(JUNK))
                .prop_map(|(p, j)| Mutation::ReplaceDigitRun(p, j)),
        ]
    }

    fn apply(line: &str, m: &Mutation) -> Vec<u8> {
        let mut b = line.as_bytes().to_vec();
        if b.is_empty() {
            return b;
        }
        match *m {
            Mutation::FlipBit(p, bit) => {
                let p = p % b.len();
                b[p] ^= 1 << bit;
            }
            Mutation::Cut(p) => b.truncate(p % b.len()),
            Mutation::Insert(p, j) => {
                let p = p % b.len();
                b.splice(p..p, j.bytes());
            }
            Mutation::ReplaceDigitRun(p, j) => {
                let digits: Vec<usize> = (0..b.len()).filter(|&i| b[i].is_ascii_digit()).collect();
                if let Some(&start) = digits.get(p % digits.len().max(1)) {
                    let end = (start..b.len())
                        .find(|&i| !b[i].is_ascii_digit())
                        .unwrap_or(b.len());
                    b.splice(start..end, j.bytes());
                }
            }
        }
        b
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        #[test]
        fn fast_path_and_serde_agree_on_mutated_lines(
            which in 0usize..9,
            ms in prop::collection::vec(mutation(), 1..3),
        ) {
            let mut line = samples()[which].clone().into_bytes();
            for m in &ms {
                line = apply(&String::from_utf8_lossy(&line), m);
            }
            // Not UTF-8: the reader rejects it before either path sees it.
            if let Ok(text) = std::str::from_utf8(&line) {
                prop_assert!(agree(text).is_ok(), "{}\n{:?}", text, agree(text));
            }
        }
    }
}

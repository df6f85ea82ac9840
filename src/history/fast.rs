//! The fast path of the history decoder: a one-pass byte scanner for the lines that make up
//! nearly all of a history, successful and failed status reads and client writes.
//!
//! serde_json needs three passes over a status line (the event, its value, its raw
//! `last_election`); at ~600 bytes a line and millions of lines that was 10x short of the
//! checker's speed goal. This scanner reads the line once and takes the few fields readers use.
//! It is strict where it answers: every value is tokenized (numbers by JSON's integer grammar),
//! nothing may follow the closing brace, a known key may not repeat. It declines (None) whatever
//! it does not handle plainly: another kind of event, any escape, a fraction or exponent, a
//! malformed line. The caller then uses `line::fallback` (serde), which also words the error.
//! So this file only decides speed, never what a line means; `line`'s property test holds it
//! to that.

use super::line::{Body, Line, StatusRead, WriteValue};
use super::{EventType, F};
use crate::api::{ServerState, ZabPhase};
use std::borrow::Cow;

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// A string without escapes (None if it has any: the caller falls back to serde_json).
    fn plain_string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.i;
        let len = special(&self.b[start..])?;
        if self.b[start + len] != b'"' {
            return None;
        }
        self.i = start + len + 1;
        Some(&self.b[start..start + len])
    }

    /// A string without escapes, skipped (an escape: None, serde decides).
    fn skip_string(&mut self) -> Option<()> {
        self.plain_string().map(|_| ())
    }

    fn u64(&mut self) -> Option<u64> {
        self.ws();
        let start = self.i;
        let mut n: u64 = 0;
        while let Some(&c) = self.b.get(self.i) {
            if !c.is_ascii_digit() {
                break;
            }
            n = n.checked_mul(10)?.checked_add((c - b'0') as u64)?;
            self.i += 1;
        }
        let len = self.i - start;
        // No sign, fraction or exponent, and no leading zero (as JSON): else serde decides.
        let next = self.b.get(self.i).copied().unwrap_or(b' ');
        let ok = len > 0
            && !(len > 1 && self.b[start] == b'0')
            && !matches!(next, b'.' | b'e' | b'E' | b'-' | b'+');
        ok.then_some(n)
    }

    fn literal(&mut self, lit: &[u8]) -> Option<()> {
        self.ws();
        self.b[self.i..]
            .starts_with(lit)
            .then(|| self.i += lit.len())
    }

    /// Exactly the bytes `lit` here, no whitespace before (the writers' own layout).
    #[inline(always)]
    fn tag(&mut self, lit: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(lit)
            .then(|| self.i += lit.len())
    }

    /// A `last_election`: null (None) or an object, its raw text. `previous` is the node's
    /// previous one: a summary that starts with exactly those bytes is that same, already
    /// validated, summary (a complete object is a prefix of no other complete object).
    fn last_election(&mut self, previous: Option<&[u8]>) -> Option<Option<&'a [u8]>> {
        match self.peek()? {
            b'n' => self.literal(b"null").map(|_| None),
            b'{' => {
                let start = self.i;
                match previous {
                    Some(p) if !p.is_empty() && self.b[start..].starts_with(p) => self.i += p.len(),
                    _ => self.skip_value(0)?,
                }
                Some(Some(&self.b[start..self.i]))
            }
            _ => None,
        }
    }

    /// An integer, strictly as JSON writes one (`-?(0|[1-9][0-9]*)`), skipped. A fraction or
    /// an exponent is None (serde decides), and so is anything JSON does not allow
    /// (`1-345`, `+5`, `01`): the structure around it must then fail too.
    fn skip_number(&mut self) -> Option<()> {
        self.ws();
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        let start = self.i;
        while self.b.get(self.i).is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        let len = self.i - start;
        let next = self.b.get(self.i).copied().unwrap_or(b' ');
        let ok = len > 0
            && !(len > 1 && self.b[start] == b'0')
            && !matches!(next, b'.' | b'e' | b'E' | b'-' | b'+');
        ok.then_some(())
    }

    /// A signed integer (JSON's grammar, no fraction or exponent) that fits an i64.
    fn i64(&mut self) -> Option<i64> {
        self.ws();
        let neg = self.b.get(self.i) == Some(&b'-');
        if neg {
            self.i += 1;
            // JSON allows nothing between the sign and the digits.
            if !self.b.get(self.i).is_some_and(|c| c.is_ascii_digit()) {
                return None;
            }
        }
        let n = self.u64()?;
        if neg && n == 0 {
            // serde_json reads `-0` as the float -0.0, which an integer field refuses: serde
            // decides.
            return None;
        }
        if neg {
            0i64.checked_sub_unsigned(n)
        } else {
            i64::try_from(n).ok()
        }
    }

    fn skip_value(&mut self, depth: u32) -> Option<()> {
        if depth > 64 {
            return None;
        }
        match self.peek()? {
            b'"' => self.skip_string(),
            b'{' => {
                self.i += 1;
                if self.eat(b'}').is_some() {
                    return Some(());
                }
                loop {
                    self.skip_string()?;
                    self.eat(b':')?;
                    self.skip_value(depth + 1)?;
                    if self.eat(b',').is_none() {
                        return self.eat(b'}');
                    }
                }
            }
            b'[' => {
                self.i += 1;
                if self.eat(b']').is_some() {
                    return Some(());
                }
                loop {
                    self.skip_value(depth + 1)?;
                    if self.eat(b',').is_none() {
                        return self.eat(b']');
                    }
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.skip_number(),
        }
    }

    /// Calls `field` for each key of an object; `field` consumes the value.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.plain_string()?;
            self.eat(b':')?;
            field(self, key)?;
            if self.eat(b',').is_none() {
                return self.eat(b'}');
            }
        }
    }
}

/// The offset of the first byte in `b` that ends or interrupts a plain string: a quote, a
/// backslash or a control character. Eight bytes at a time (SWAR): keys and values are short
/// but there are twenty-odd per line, and this was the scanner's hottest loop.
fn special(b: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut j = 0;
    while j + 8 <= b.len() {
        let w = u64::from_le_bytes(b[j..j + 8].try_into().expect("8 bytes"));
        let q = w ^ (ONES * b'"' as u64);
        let bs = w ^ (ONES * b'\\' as u64);
        // The lowest flagged byte is exact (borrows only flag bytes above it).
        let m = (q.wrapping_sub(ONES) & !q
            | bs.wrapping_sub(ONES) & !bs
            | w.wrapping_sub(ONES * 0x20) & !w)
            & HIGH;
        if m != 0 {
            return Some(j + (m.trailing_zeros() / 8) as usize);
        }
        j += 8;
    }
    b[j..]
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
        .map(|p| j + p)
}

fn state(s: &[u8]) -> Option<ServerState> {
    Some(match s {
        b"LOOKING" => ServerState::Looking,
        b"FOLLOWING" => ServerState::Following,
        b"LEADING" => ServerState::Leading,
        b"OBSERVING" => ServerState::Observing,
        _ => return None,
    })
}

fn phase(s: &[u8]) -> Option<ZabPhase> {
    Some(match s {
        b"election" => ZabPhase::Election,
        b"discovery" => ZabPhase::Discovery,
        b"sync" => ZabPhase::Sync,
        b"broadcast" => ZabPhase::Broadcast,
        _ => return None,
    })
}

fn event_type(s: &[u8]) -> Option<EventType> {
    Some(match s {
        b"invoke" => EventType::Invoke,
        b"ok" => EventType::Ok,
        b"fail" => EventType::Fail,
        b"info" => EventType::Info,
        _ => return None,
    })
}

/// Which of the `f`s the scanner reads (any other: None, serde's business).
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Status,
    Write,
}

/// Marks `bit` in `seen`; None when it was already there (serde rejects a repeated field).
fn once(seen: &mut u32, bit: u32) -> Option<()> {
    let fresh = *seen & bit == 0;
    *seen |= bit;
    fresh.then_some(())
}

/// `s` (a slice of `text` between two ASCII bytes) as text.
fn text_of<'a>(text: &'a str, s: &[u8]) -> &'a str {
    let off = s.as_ptr() as usize - text.as_ptr() as usize;
    &text[off..off + s.len()]
}

/// A successful status read laid out exactly as the controller writes it: an `Event` whose
/// value is an `api::NodeStatus` turned into a `serde_json::Value` (so its keys are sorted),
/// no whitespace. The fixed text between the values is compared whole instead of tokenized
/// key by key, which halves the cost of the commonest line. Anything else (other keys,
/// another order, a missing field) is None and goes to the general scan, which reads any
/// layout.
fn status_as_written<'a, 'p>(
    text: &'a str,
    previous: &impl Fn(&[u8]) -> Option<&'p [u8]>,
) -> Option<Line<'a>> {
    let line = text.as_bytes();
    let mut c = Cursor { b: line, i: 0 };
    c.tag(br#"{"index":"#)?;
    let index = c.u64()?;
    c.tag(br#","time":"#)?;
    let time = c.u64()?;
    c.tag(br#","process":"#)?;
    let process = c.plain_string()?;
    c.tag(br#","type":"ok","f":"status","node":"#)?;
    let node = c.plain_string()?;
    c.tag(br#","value":{"accepted_epoch":"#)?;
    let accepted_epoch = c.u64()?;
    c.tag(br#","election_epoch":"#)?;
    c.skip_number()?;
    c.tag(br#","last_committed_zxid":"#)?;
    let last_committed_zxid = c.u64()?;
    c.tag(br#","last_election":"#)?;
    let last_election = c.last_election(previous(node))?;
    c.tag(br#","last_zxid":"#)?;
    let last_zxid = c.u64()?;
    c.tag(br#","last_zxid_hex":"#)?;
    c.skip_string()?;
    c.tag(br#","leader":"#)?;
    let leader = match c.tag(b"null") {
        Some(()) => None,
        None => Some(c.u64()?),
    };
    c.tag(br#","peer_epoch":"#)?;
    let peer_epoch = c.u64()?;
    c.tag(br#","sid":"#)?;
    c.skip_number()?;
    c.tag(br#","state":"#)?;
    let state = state(c.plain_string()?)?;
    c.tag(br#","uptime_ms":"#)?;
    c.skip_number()?;
    c.tag(br#","wall_clock_ms":"#)?;
    let wall_clock_ms = c.i64()?;
    c.tag(br#","zab_phase":"#)?;
    let phase = phase(c.plain_string()?)?;
    c.tag(b"}}")?;
    c.ws();
    (c.i == line.len()).then(|| Line {
        text,
        index,
        time,
        process: Cow::Borrowed(text_of(text, process)),
        kind: EventType::Ok,
        f: F::Status,
        f_name: Cow::Borrowed("status"),
        node: Some(Cow::Borrowed(text_of(text, node))),
        body: Body::Status(StatusRead {
            state,
            phase,
            leader,
            peer_epoch,
            accepted_epoch,
            last_zxid,
            last_committed_zxid,
            wall_clock_ms: Some(wall_clock_ms),
            last_election: last_election.map(|e| text_of(text, e)),
            config: None,
        }),
    })
}

/// The status read or write in `text`, or None when the line is anything else or not plain.
///
/// `previous(node)` is the raw `last_election` of that node's previous read: a summary that
/// starts with exactly those bytes is that same (already validated) summary, which saves
/// tokenizing the largest part of the line; it changes once per election.
#[allow(
    clippy::too_many_lines,
    reason = "the fast decoder: one match per field over one line's bytes, in the order fields come"
)]
pub fn line<'a, 'p>(
    text: &'a str,
    previous: impl Fn(&[u8]) -> Option<&'p [u8]>,
) -> Option<Line<'a>> {
    if let Some(l) = status_as_written(text, &previous) {
        return Some(l);
    }
    let line = text.as_bytes();
    let mut c = Cursor { b: line, i: 0 };
    let (mut index, mut time, mut node, mut process) = (None, None, None, None);
    let (mut kind, mut f) = (None, None);
    let mut status = None;
    let mut write = WriteFields::default();
    let mut seen = 0u32;
    c.object(|c, key| {
        match key {
            b"index" => {
                once(&mut seen, 1)?;
                index = Some(c.u64()?)
            }
            b"time" => {
                once(&mut seen, 2)?;
                time = Some(c.u64()?)
            }
            b"process" => {
                once(&mut seen, 4)?;
                process = Some(c.plain_string()?)
            }
            b"type" => {
                once(&mut seen, 8)?;
                kind = Some(event_type(c.plain_string()?)?)
            }
            b"f" => {
                once(&mut seen, 16)?;
                f = Some(match c.plain_string()? {
                    b"status" => Kind::Status,
                    b"write" => Kind::Write,
                    _ => return None,
                })
            }
            b"node" => {
                once(&mut seen, 32)?;
                // serde reads null as "no node".
                node = if c.peek()? == b'n' {
                    c.literal(b"null")?;
                    None
                } else {
                    Some(c.plain_string()?)
                }
            }
            // Only judged once we know what the event is (writers put f and type first).
            b"value" => {
                once(&mut seen, 64)?;
                match (f?, kind?) {
                    (Kind::Status, EventType::Ok) => {
                        status = Some(status_value(c, node.and_then(&previous))?)
                    }
                    (Kind::Status, _) => c.skip_value(0)?,
                    (Kind::Write, _) => write = write_value(c)?,
                }
            }
            _ => c.skip_value(0)?,
        }
        Some(())
    })?;
    c.ws();
    if c.i != line.len() {
        return None;
    }
    let (index, time, process, kind) = (index?, time?, process?, kind?);
    let s = |b: &[u8]| Cow::Borrowed(text_of(text, b));
    let (f, f_name, body) = match f? {
        Kind::Status if kind == EventType::Ok => {
            // serde's errors (no node, no value, a missing field) are serde's to word.
            node?;
            let v = status?;
            let body = Body::Status(StatusRead {
                state: v.state?,
                phase: v.phase?,
                leader: v.leader.flatten(),
                peer_epoch: v.peer_epoch?,
                accepted_epoch: v.accepted_epoch?,
                last_zxid: v.last_zxid?,
                last_committed_zxid: v.last_committed_zxid?,
                wall_clock_ms: v.wall_clock_ms.flatten(),
                last_election: v.last_election.map(|e| text_of(text, e)),
                config: None,
            });
            (F::Status, "status", body)
        }
        Kind::Status => (F::Status, "status", Body::Unreachable),
        // serde words an acknowledgement without its value or zxid.
        Kind::Write if kind == EventType::Ok && (write.value.is_none() || write.zxid.is_none()) => {
            return None
        }
        Kind::Write => (
            F::Write,
            "write",
            Body::Write(WriteValue {
                value: write.value.map(s),
                zxid: write.zxid,
            }),
        ),
    };
    Some(Line {
        text,
        index,
        time,
        process: s(process),
        kind,
        f,
        f_name: Cow::Borrowed(f_name),
        node: node.map(s),
        body,
    })
}

/// A write's `value.value` (raw canonical text) and `value.zxid`.
#[derive(Default)]
struct WriteFields<'a> {
    value: Option<&'a [u8]>,
    zxid: Option<u64>,
}

/// A write's value: an object, or null (no value, no zxid).
fn write_value<'a>(c: &mut Cursor<'a>) -> Option<WriteFields<'a>> {
    let mut f = WriteFields::default();
    if c.peek()? == b'n' {
        c.literal(b"null")?;
        return Some(f);
    }
    let mut seen = 0u32;
    c.object(|c, key| {
        match key {
            b"value" => {
                once(&mut seen, 1)?;
                c.ws();
                let from = c.i;
                if c.peek()? == b'"' {
                    c.plain_string()?;
                } else {
                    c.u64()?;
                }
                f.value = Some(&c.b[from..c.i]);
            }
            b"zxid" => {
                once(&mut seen, 2)?;
                f.zxid = Some(c.u64()?)
            }
            _ => c.skip_value(0)?,
        }
        Some(())
    })?;
    Some(f)
}

/// The status fields found (None: absent; `leader`/`wall_clock_ms`: Some(None) = null).
#[derive(Default)]
struct StatusFound<'a> {
    state: Option<ServerState>,
    phase: Option<ZabPhase>,
    leader: Option<Option<u64>>,
    peer_epoch: Option<u64>,
    accepted_epoch: Option<u64>,
    last_zxid: Option<u64>,
    last_committed_zxid: Option<u64>,
    wall_clock_ms: Option<Option<i64>>,
    last_election: Option<&'a [u8]>,
}

fn status_value<'a>(c: &mut Cursor<'a>, previous: Option<&[u8]>) -> Option<StatusFound<'a>> {
    let mut f = StatusFound::default();
    let mut seen = 0u32;
    c.object(|c, key| {
        match key {
            b"state" => {
                once(&mut seen, 1)?;
                f.state = Some(state(c.plain_string()?)?)
            }
            b"zab_phase" => {
                once(&mut seen, 2)?;
                f.phase = Some(phase(c.plain_string()?)?)
            }
            b"leader" => {
                once(&mut seen, 4)?;
                f.leader = Some(if c.peek()? == b'n' {
                    c.literal(b"null")?;
                    None
                } else {
                    Some(c.u64()?)
                })
            }
            b"peer_epoch" => {
                once(&mut seen, 8)?;
                f.peer_epoch = Some(c.u64()?)
            }
            b"accepted_epoch" => {
                once(&mut seen, 16)?;
                f.accepted_epoch = Some(c.u64()?)
            }
            b"last_election" => {
                once(&mut seen, 32)?;
                f.last_election = c.last_election(previous)?;
            }
            b"last_zxid" => {
                once(&mut seen, 64)?;
                f.last_zxid = Some(c.u64()?)
            }
            b"last_committed_zxid" => {
                once(&mut seen, 128)?;
                f.last_committed_zxid = Some(c.u64()?)
            }
            b"wall_clock_ms" => {
                once(&mut seen, 256)?;
                f.wall_clock_ms = Some(if c.peek()? == b'n' {
                    c.literal(b"null")?;
                    None
                } else {
                    Some(c.i64()?)
                })
            }
            // A changed config (after a reconfig) is rare: serde reads those lines.
            b"config" => return None,
            _ => c.skip_value(0)?,
        }
        Some(())
    })?;
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{CountedVote, ElectionSummary, NodeStatus, PeerType, ReceivedVote};
    use crate::history::Event;

    /// Every optional field present, so a field declared out of order shows.
    fn full_status(peer_type: PeerType) -> NodeStatus {
        NodeStatus {
            accepted_epoch: 3,
            election_epoch: 4,
            last_committed_zxid: 12884901890,
            config: None,
            last_election: Some(ElectionSummary {
                joined: true,
                leader: 2,
                own_round: Some(3),
                peer_epoch: 2,
                received: vec![ReceivedVote {
                    leader: 1,
                    peer_epoch: 2,
                    round: 4,
                    sid: 1,
                    state: ServerState::Looking,
                    zxid: 8589934592,
                }],
                round: 4,
                took_ms: 231,
                votes: vec![CountedVote {
                    leader: 2,
                    peer_epoch: 2,
                    round: Some(4),
                    sid: 1,
                    state: Some(ServerState::Following),
                    zxid: 8589934593,
                }],
                zxid: 8589934593,
            }),
            last_zxid: 12884901890,
            last_zxid_hex: "0x300000002".into(),
            leader: Some(2),
            peer_epoch: 3,
            peer_type,
            sid: 2,
            state: ServerState::Leading,
            uptime_ms: 5,
            wall_clock_ms: -3,
            zab_phase: ZabPhase::Broadcast,
        }
    }

    fn event<V>(value: V) -> Event<V> {
        Event {
            index: 7,
            time: 120000000,
            process: "n2".into(),
            kind: EventType::Ok,
            f: F::Status,
            node: Some("n2".into()),
            value,
        }
    }

    /// The api types declare their fields sorted, so a status serialized directly (the
    /// simulator) is byte for byte what the controller writes through `serde_json::Value`;
    /// and a participant's line takes this file's fixed-layout path.
    #[test]
    fn a_status_serialized_directly_is_the_controllers_line_and_takes_the_fixed_layout() {
        for peer_type in [PeerType::Participant, PeerType::Observer] {
            let status = full_status(peer_type);
            let direct = serde_json::to_string(&event(&status)).unwrap();
            let value = serde_json::to_value(&status).unwrap();
            assert_eq!(direct, serde_json::to_string(&event(value)).unwrap());
            let fixed = status_as_written(&direct, &|_| None);
            assert_eq!(
                fixed.is_some(),
                peer_type == PeerType::Participant,
                "{direct}"
            );
        }
    }
}

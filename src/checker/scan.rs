//! A one-pass byte scanner for the common lines of a history: status reads (successful or
//! not) and client writes.
//!
//! serde_json needs three passes over a status line (the event, its value, its raw
//! `last_election`) and validates UTF-8 first; at ~600 bytes a line and millions of lines that
//! was 10x short of the checker's speed goal. This scanner reads the line once, strictly (every
//! value is tokenized, nothing may follow the closing brace, a known key may not repeat;
//! numbers it skips are checked only loosely), takes the few fields the checkers use, and
//! returns None for anything it does not handle plainly (another kind of event, an escaped
//! string where a field is read, a float, a malformed line): the caller then parses the line
//! with serde_json, which also produces the error message for a bad line. So the scanner only
//! decides speed, never what a line means.

use crate::api::{ServerState, ZabPhase};
use crate::history::EventType;

/// The fields of a status read (`"f":"status"`, `"type":"ok"`) the checkers use.
#[derive(Debug, PartialEq)]
pub struct StatusLine<'a> {
    pub index: u64,
    pub time: u64,
    pub node: &'a [u8],
    pub state: ServerState,
    pub phase: ZabPhase,
    pub leader: Option<u64>,
    pub peer_epoch: u64,
    pub accepted_epoch: u64,
    /// The raw JSON of `last_election` (an object), or None when absent or null.
    pub last_election: Option<&'a [u8]>,
}

/// A line the scanner took apart: the kinds of event that make up nearly all of a history.
#[derive(Debug, PartialEq)]
pub enum Scanned<'a> {
    /// A successful status read.
    Status(StatusLine<'a>),
    /// A status read that failed or timed out (`"f":"status"`, any other type).
    Unreachable { time: u64, node: Option<&'a [u8]> },
    /// A client write's invocation or completion.
    Write {
        time: u64,
        process: &'a [u8],
        kind: EventType,
        node: Option<&'a [u8]>,
        /// `value.value` as serde_json would print it compactly (`model::canonical`): taken
        /// only when that is its raw text (a string without escapes, or an unsigned integer).
        value: Option<&'a [u8]>,
        zxid: Option<u64>,
    },
}

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

    fn skip_string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            self.i += special(self.b.get(self.i..)?)?;
            match self.b[self.i] {
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => self.i += 2,
                _ => return None,
            }
        }
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

    fn skip_number(&mut self) -> Option<()> {
        let start = self.i;
        while self.i < self.b.len()
            && matches!(
                self.b[self.i],
                b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'
            )
        {
            self.i += 1;
        }
        (self.i > start).then_some(())
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

/// The status read in `line`, or None when the line is anything else or not plain.
pub fn status_line<'a, 'p>(
    line: &'a [u8],
    previous: impl Fn(&[u8]) -> Option<&'p [u8]>,
) -> Option<StatusLine<'a>> {
    match self::line(line, previous)? {
        Scanned::Status(s) => Some(s),
        _ => None,
    }
}

/// A successful status read laid out exactly as the controller writes it: an `Event` whose
/// value is an `api::NodeStatus` turned into a `serde_json::Value` (so its keys are sorted),
/// no whitespace. The fixed text between the values is compared whole instead of tokenized
/// key by key, which halves the cost of the commonest line. Anything else (other keys,
/// another order, a missing field) is None and goes to the general scan, which reads any
/// layout.
fn status_as_written<'a, 'p>(
    line: &'a [u8],
    previous: impl Fn(&[u8]) -> Option<&'p [u8]>,
) -> Option<StatusLine<'a>> {
    let mut c = Cursor { b: line, i: 0 };
    c.tag(br#"{"index":"#)?;
    let index = c.u64()?;
    c.tag(br#","time":"#)?;
    let time = c.u64()?;
    c.tag(br#","process":"#)?;
    c.plain_string()?;
    c.tag(br#","type":"ok","f":"status","node":"#)?;
    let node = c.plain_string()?;
    c.tag(br#","value":{"accepted_epoch":"#)?;
    let accepted_epoch = c.u64()?;
    c.tag(br#","election_epoch":"#)?;
    c.skip_number()?;
    c.tag(br#","last_committed_zxid":"#)?;
    c.skip_number()?;
    c.tag(br#","last_election":"#)?;
    let last_election = c.last_election(previous(node))?;
    c.tag(br#","last_zxid":"#)?;
    c.skip_number()?;
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
    c.skip_number()?;
    c.tag(br#","zab_phase":"#)?;
    let phase = phase(c.plain_string()?)?;
    c.tag(b"}}")?;
    (c.i == line.len()).then_some(StatusLine {
        index,
        time,
        node,
        state,
        phase,
        leader,
        peer_epoch,
        accepted_epoch,
        last_election,
    })
}

/// The status read or write in `line`, or None when the line is anything else or not plain.
///
/// `previous(node)` is the raw `last_election` of that node's previous read: a summary that
/// starts with exactly those bytes is that same (already validated) summary, which saves
/// tokenizing the largest part of the line; it changes once per election.
pub fn line<'a, 'p>(
    line: &'a [u8],
    previous: impl Fn(&[u8]) -> Option<&'p [u8]>,
) -> Option<Scanned<'a>> {
    if let Some(s) = status_as_written(line, &previous) {
        return Some(Scanned::Status(s));
    }
    let mut c = Cursor { b: line, i: 0 };
    let (mut index, mut time, mut node, mut process) = (None, None, None, None);
    let (mut kind, mut f) = (None, None);
    let mut status = None;
    let mut write: WriteFields = (None, None);
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
                node = Some(c.plain_string()?)
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
    let (index, time, _, kind) = (index?, time?, process?, kind?);
    Some(match f? {
        Kind::Status if kind == EventType::Ok => {
            let v = status?;
            Scanned::Status(StatusLine {
                index,
                time,
                node: node?,
                state: v.0?,
                phase: v.1.unwrap_or(ZabPhase::Election),
                leader: v.2,
                peer_epoch: v.3?,
                accepted_epoch: v.4.unwrap_or(0),
                last_election: v.5,
            })
        }
        Kind::Status => Scanned::Unreachable { time, node },
        Kind::Write => Scanned::Write {
            time,
            process: process?,
            kind,
            node,
            value: write.0,
            zxid: write.1,
        },
    })
}

/// A write's `value.value` (raw canonical text) and `value.zxid`.
type WriteFields<'a> = (Option<&'a [u8]>, Option<u64>);

/// A write's value: an object, or null (no value, no zxid).
fn write_value<'a>(c: &mut Cursor<'a>) -> Option<WriteFields<'a>> {
    let mut f: WriteFields = (None, None);
    if c.peek()? == b'n' {
        c.literal(b"null")?;
        return Some(f);
    }
    let mut seen = 0u32;
    c.object(|c, key| {
        match key {
            b"value" => {
                once(&mut seen, 1)?;
                let start = c.peek()?;
                let from = c.i;
                if start == b'"' {
                    c.plain_string()?;
                } else {
                    c.u64()?;
                }
                f.0 = Some(&c.b[from..c.i]);
            }
            b"zxid" => {
                once(&mut seen, 2)?;
                f.1 = Some(c.u64()?)
            }
            _ => c.skip_value(0)?,
        }
        Some(())
    })?;
    Some(f)
}

type Fields<'a> = (
    Option<ServerState>,
    Option<ZabPhase>,
    Option<u64>,
    Option<u64>,
    Option<u64>,
    Option<&'a [u8]>,
);

fn status_value<'a>(c: &mut Cursor<'a>, previous: Option<&[u8]>) -> Option<Fields<'a>> {
    let mut f: Fields = (None, None, None, None, None, None);
    let mut seen = 0u32;
    c.object(|c, key| {
        match key {
            b"state" => {
                once(&mut seen, 1)?;
                f.0 = Some(state(c.plain_string()?)?)
            }
            b"zab_phase" => {
                once(&mut seen, 2)?;
                f.1 = Some(phase(c.plain_string()?)?)
            }
            b"leader" => {
                once(&mut seen, 4)?;
                f.2 = if c.peek()? == b'n' {
                    c.literal(b"null")?;
                    None
                } else {
                    Some(c.u64()?)
                }
            }
            b"peer_epoch" => {
                once(&mut seen, 8)?;
                f.3 = Some(c.u64()?)
            }
            b"accepted_epoch" => {
                once(&mut seen, 16)?;
                f.4 = Some(c.u64()?)
            }
            b"last_election" => {
                once(&mut seen, 32)?;
                f.5 = c.last_election(previous)?;
            }
            _ => c.skip_value(0)?,
        }
        Some(())
    })?;
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"index":7,"time":120000000,"process":"n2","type":"ok","f":"status","node":"n2","value":{"accepted_epoch":3,"election_epoch":4,"last_committed_zxid":12884901890,"last_election":{"leader":2,"peer_epoch":2,"round":4,"took_ms":231,"votes":[{"leader":2,"peer_epoch":2,"sid":1,"zxid":8589934593}],"zxid":8589934593},"last_zxid":12884901890,"last_zxid_hex":"0x300000002","leader":2,"peer_epoch":3,"sid":2,"state":"LEADING","uptime_ms":5,"wall_clock_ms":-3,"zab_phase":"broadcast"}}"#;

    #[test]
    fn reads_a_status_line_in_any_key_order() {
        let s = status_line(LINE.as_bytes(), |_| None).expect("plain status line");
        assert_eq!((s.index, s.time, s.node), (7, 120_000_000, &b"n2"[..]));
        assert_eq!(
            (s.state, s.phase),
            (ServerState::Leading, ZabPhase::Broadcast)
        );
        assert_eq!((s.leader, s.peer_epoch, s.accepted_epoch), (Some(2), 3, 3));
        let raw = s.last_election.unwrap();
        let parsed: crate::api::ElectionSummary = serde_json::from_slice(raw).unwrap();
        assert_eq!((parsed.leader, parsed.votes.len()), (2, 1));
    }

    #[test]
    fn leaves_everything_else_to_serde() {
        for bad in [
            // Not a status read, or not ok.
            LINE.replace(r#""f":"status""#, r#""f":"write""#),
            LINE.replace(r#""type":"ok""#, r#""type":"info""#),
            // Malformed or not plain: truncated, trailing bytes, escapes, floats, bad enums.
            LINE[..LINE.len() - 1].to_string(),
            format!("{LINE}x"),
            LINE.replace(r#""node":"n2""#, r#""node":"n\u0032""#),
            LINE.replace(r#""peer_epoch":3"#, r#""peer_epoch":3.0"#),
            LINE.replace(r#""peer_epoch":3"#, r#""peer_epoch":-3"#),
            LINE.replace("LEADING", "LEADER"),
            LINE.replace(r#""took_ms":231"#, r#""took_ms":231,"#),
            LINE.replace(r#""index":7"#, r#""index":07"#),
            // A backslash as the very last byte, inside a skipped string.
            LINE[..LINE.find(r#""n2","type""#).unwrap() + 3].to_string() + "\\",
            LINE.replace(r#""index":7"#, r#""index":99999999999999999999999"#),
        ] {
            assert_eq!(status_line(bad.as_bytes(), |_| None), None, "{bad}");
        }
    }

    #[test]
    fn an_unchanged_last_election_is_matched_not_rescanned() {
        let first = status_line(LINE.as_bytes(), |_| None).unwrap();
        let raw = first.last_election.unwrap();
        let again = status_line(LINE.as_bytes(), |n| (n == b"n2").then_some(raw)).unwrap();
        assert_eq!(again.last_election, Some(raw));
        // A different previous summary is no shortcut: the line's own is scanned.
        let other = br#"{"leader":9}"#;
        let changed = status_line(LINE.as_bytes(), |_| Some(&other[..])).unwrap();
        assert_eq!(changed.last_election, Some(raw));
    }

    #[test]
    fn finds_the_first_quote_backslash_or_control_byte() {
        // Every position, both sides of the 8-byte boundary, bytes above 0x7f in front.
        for len in 0..20 {
            for (stop, want) in [
                (b'"', true),
                (b'\\', true),
                (0x1f, true),
                (0x7f, false),
                (0xc3, false),
            ] {
                let mut v = vec![b'a'; len];
                v.extend_from_slice(&[0xc3, 0xa9]);
                v.push(stop);
                v.extend_from_slice(b"xx\"");
                let expected = if want { len + 2 } else { len + 5 };
                assert_eq!(special(&v), Some(expected), "len {len} stop {stop:#x}");
            }
        }
        assert_eq!(special(b"abcdefghijklmnop"), None);
    }

    #[test]
    fn the_controllers_own_layout_takes_the_template() {
        // Written as the controller writes it (`run::observe`): a `NodeStatus` made a `Value`,
        // in an `Event`, serialized.
        let e: crate::history::Event = serde_json::from_str(LINE).unwrap();
        let s: crate::api::NodeStatus = serde_json::from_value(e.value.clone()).unwrap();
        let written = crate::history::Event {
            value: serde_json::to_value(&s).unwrap(),
            ..e
        };
        let text = serde_json::to_string(&written).unwrap();
        let fast = status_as_written(text.as_bytes(), |_| None).expect(&text);
        assert_eq!(Some(fast), status_line(LINE.as_bytes(), |_| None));
        // Another order still scans, just not through the template.
        let moved = LINE.replace(
            r#""index":7,"time":120000000"#,
            r#""time":120000000,"index":7"#,
        );
        assert_eq!(status_as_written(moved.as_bytes(), |_| None), None);
        assert_eq!(
            status_line(moved.as_bytes(), |_| None),
            status_line(LINE.as_bytes(), |_| None)
        );
    }

    #[test]
    fn reads_unreachable_reads_and_plain_writes() {
        let l = br#"{"index":3,"time":9,"process":"n2","type":"info","f":"status","node":"n2","value":{"error":"timed out"}}"#;
        assert_eq!(
            line(l, |_| None),
            Some(Scanned::Unreachable {
                time: 9,
                node: Some(&b"n2"[..])
            })
        );
        let w = br#"{"index":4,"time":10,"process":"0","type":"ok","f":"write","value":{"value":"w1","zxid":12}}"#;
        assert_eq!(
            line(w, |_| None),
            Some(Scanned::Write {
                time: 10,
                process: b"0",
                kind: EventType::Ok,
                node: None,
                value: Some(&br#""w1""#[..]),
                zxid: Some(12)
            })
        );
        // Values whose canonical text is not their raw text, and repeated keys: serde's.
        for odd in [r#""value":"w\u0031""#, r#""value":1.0"#, r#""value":[1]"#] {
            let l = String::from_utf8_lossy(w).replace(r#""value":"w1""#, odd);
            assert_eq!(line(l.as_bytes(), |_| None), None, "{l}");
        }
        let twice = String::from_utf8_lossy(w).replace(r#""zxid":12"#, r#""zxid":12,"zxid":13"#);
        assert_eq!(line(twice.as_bytes(), |_| None), None);
    }

    #[test]
    fn agrees_with_serde_on_what_it_accepts() {
        let e: crate::history::Event = serde_json::from_str(LINE).unwrap();
        let s: crate::api::NodeStatus = serde_json::from_value(e.value).unwrap();
        let fast = status_line(LINE.as_bytes(), |_| None).unwrap();
        assert_eq!(
            (fast.state, fast.phase, fast.leader),
            (s.state, s.zab_phase, s.leader)
        );
        assert_eq!(
            (fast.peer_epoch, fast.accepted_epoch),
            (s.peer_epoch, s.accepted_epoch)
        );
    }
}

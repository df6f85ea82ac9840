//! A hand-rolled fast path for `LiteEvent`: scans one history line's bytes, reading the few
//! fields the report needs and skipping everything else (a status read's `last_election`
//! with its votes is most of each line) by bracket counting, without building or validating
//! what it skips. Anything unexpected (escapes in names, floats, unknown `f`, a torn line)
//! returns None and the caller falls back to serde, which parses it properly or names the
//! error. Several times faster than serde on status reads, which are >95% of a history.

use super::lite::{LaneState, LiteEvent, LiteValue};
use crate::history::{EventType, F};
use std::borrow::Cow;

/// Parses one line (without its newline): the fast path, else serde.
pub fn parse_line(line: &[u8]) -> Result<LiteEvent<'_>, serde_json::Error> {
    match event(line) {
        Some(e) => Ok(e),
        None => serde_json::from_slice(line),
    }
}

/// Parses the event at the start of `buf` (one line of a block) on the fast path: the
/// event and how many bytes it took, its newline included. None: use the slow path.
pub fn parse_next(buf: &[u8]) -> Option<(LiteEvent<'_>, usize)> {
    if buf.first() != Some(&b'{') {
        return None;
    }
    let mut c = Cur { b: buf, i: 0 };
    let e = fields(&mut c)?;
    while matches!(c.b.get(c.i), Some(b' ' | b'\t' | b'\r')) {
        c.i += 1;
    }
    match c.b.get(c.i) {
        None => Some((e, c.i)),
        Some(b'\n') => Some((e, c.i + 1)),
        Some(_) => None,
    }
}

struct Cur<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cur<'a> {
    fn ws(&mut self) {
        while matches!(self.b.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
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

    /// A string without escapes, borrowed from the line.
    fn str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.raw_str()?).ok()
    }

    /// The bytes of a string without escapes (keys need no UTF-8 check: they are compared).
    fn raw_str(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.i;
        loop {
            match *self.b.get(self.i)? {
                b'"' => break,
                b'\\' => return None,
                _ => self.i += 1,
            }
        }
        let s = &self.b[start..self.i];
        self.i += 1;
        Some(s)
    }

    fn u64(&mut self) -> Option<u64> {
        self.ws();
        let start = self.i;
        let mut n: u64 = 0;
        while let Some(&d) = self.b.get(self.i) {
            if !d.is_ascii_digit() {
                break;
            }
            n = n.checked_mul(10)?.checked_add((d - b'0') as u64)?;
            self.i += 1;
        }
        if self.i == start || matches!(self.b.get(self.i), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(n)
    }

    fn i64(&mut self) -> Option<i64> {
        if self.peek()? == b'-' {
            self.i += 1;
            i64::try_from(self.u64()?).ok().map(|n| -n)
        } else {
            i64::try_from(self.u64()?).ok()
        }
    }

    fn null(&mut self) -> bool {
        self.ws();
        if self.b[self.i..].starts_with(b"null") {
            self.i += 4;
            true
        } else {
            false
        }
    }

    /// Skips any value.
    fn skip(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => {
                self.i += 1;
                self.skip_string_body()
            }
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    let c = *self.b.get(self.i)?;
                    self.i += 1;
                    match c {
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                return Some(());
                            }
                        }
                        b'"' => self.skip_string_body()?,
                        _ => {}
                    }
                }
            }
            _ => {
                let start = self.i;
                while let Some(&c) = self.b.get(self.i) {
                    if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
                        break;
                    }
                    self.i += 1;
                }
                (self.i > start).then_some(())
            }
        }
    }

    fn skip_string_body(&mut self) -> Option<()> {
        loop {
            match *self.b.get(self.i)? {
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => self.i += 2,
                _ => self.i += 1,
            }
        }
    }

    /// Calls `field` for each key of an object, which must consume the key's value.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let key = self.raw_str()?;
            self.eat(b':')?;
            field(self, key)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn value(&mut self) -> Option<LiteValue> {
        let mut v = LiteValue::default();
        if self.peek()? != b'{' {
            self.skip()?;
            return Some(v);
        }
        self.object(|c, key| {
            match key {
                b"state" => {
                    v.state = if c.peek()? == b'"' {
                        LaneState::parse_bytes(c.raw_str()?)
                    } else {
                        c.skip()?;
                        None
                    }
                }
                b"leader" => v.leader = if c.null() { None } else { Some(c.u64()?) },
                b"peer_epoch" => v.peer_epoch = Some(c.u64()?),
                b"last_zxid" => v.last_zxid = Some(c.u64()?),
                b"wall_clock_ms" => v.wall_clock_ms = Some(c.i64()?),
                b"zxid" => {
                    v.zxid = if c.peek()?.is_ascii_digit() {
                        Some(c.u64()?)
                    } else {
                        c.skip()?;
                        None
                    }
                }
                b"error" => {
                    c.skip()?;
                    v.has_error = true;
                }
                _ => c.skip()?,
            }
            Some(())
        })?;
        Some(v)
    }
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

fn f_of(s: &[u8]) -> Option<F> {
    Some(match s {
        b"status" => F::Status,
        b"write" => F::Write,
        b"read" => F::Read,
        b"final-log" => F::FinalLog,
        b"kill" => F::Kill,
        b"start" => F::Start,
        b"pause" => F::Pause,
        b"resume" => F::Resume,
        b"partition" => F::Partition,
        b"heal" => F::Heal,
        b"clock" => F::Clock,
        _ => return None,
    })
}

fn event(line: &[u8]) -> Option<LiteEvent<'_>> {
    let mut c = Cur { b: line, i: 0 };
    let e = fields(&mut c)?;
    c.ws();
    (c.i == line.len()).then_some(e)
}

fn fields<'a>(c: &mut Cur<'a>) -> Option<LiteEvent<'a>> {
    let (mut time, mut process, mut kind, mut f, mut node) = (None, None, None, None, None);
    let mut value = LiteValue::default();
    c.object(|c, key| {
        match key {
            b"time" => time = Some(c.u64()?),
            b"process" => process = Some(c.str()?),
            b"type" => kind = Some(event_type(c.raw_str()?)?),
            b"f" => f = Some(f_of(c.raw_str()?)?),
            b"node" => node = if c.null() { None } else { Some(c.str()?) },
            b"value" => value = c.value()?,
            _ => c.skip()?,
        }
        Some(())
    })?;
    Some(LiteEvent {
        time: time?,
        process: Cow::Borrowed(process?),
        kind: kind?,
        f: f?,
        node: node.map(Cow::Borrowed),
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{write_run, FixtureSpec};
    use std::io::BufRead;

    fn same(a: &LiteEvent, b: &LiteEvent) -> bool {
        a.time == b.time
            && a.process == b.process
            && a.kind == b.kind
            && a.f == b.f
            && a.node == b.node
            && a.value == b.value
    }

    #[test]
    fn the_fast_path_agrees_with_serde_on_a_whole_synthetic_history() {
        let root = tempfile::tempdir().unwrap();
        let spec = FixtureSpec {
            duration_s: 12.0,
            ..FixtureSpec::small("fast")
        };
        let fx = write_run(root.path(), &spec).unwrap();
        let file = std::fs::File::open(fx.run_dir.join("history.jsonl")).unwrap();
        let mut fast_hits = 0;
        for line in std::io::BufReader::new(file).lines() {
            let line = line.unwrap();
            let slow: LiteEvent = serde_json::from_str(&line).unwrap();
            if let Some(fast) = event(line.as_bytes()) {
                assert!(same(&fast, &slow), "{line}\nfast {fast:?}\nserde {slow:?}");
                fast_hits += 1;
            }
        }
        assert_eq!(
            fast_hits as u64, fx.events,
            "every fixture line takes the fast path"
        );
    }

    #[test]
    fn odd_lines_fall_back_to_serde_and_broken_ones_fail() {
        let odd = [
            r#"{"time":5,"process":"n\u0031","type":"ok","f":"status","value":{"state":"LEADING"}}"#,
            r#"{ "value" : {"leader": null, "zxid": "x", "state": 3}, "f" : "write", "type":"info", "process":"2", "time": 7 }"#,
            r#"{"time":1.5e3,"process":"1","type":"ok","f":"write","value":null}"#,
        ];
        for line in odd {
            let slow: Result<LiteEvent, _> = serde_json::from_str(line);
            let got = parse_line(line.as_bytes());
            match (slow, got) {
                (Ok(s), Ok(g)) => assert!(same(&s, &g), "{line}"),
                (Err(_), Err(_)) => {}
                (s, g) => panic!("{line}: serde {s:?} vs parse_line {g:?}"),
            }
        }
        assert_eq!(parse_line(odd[0].as_bytes()).unwrap().process, "n1");
        for broken in [
            r#"{"time":5,"process":"n1","type":"ok","f":"status","value":{"state":"LEAD"#,
            // (An unknown `f` is no longer broken: it reads as `F::Other`, per CONTRACTS.md.)
            r#"{"time":5} trailing"#,
            "",
        ] {
            assert!(parse_line(broken.as_bytes()).is_err(), "{broken}");
        }
    }
}

//! Test-only: feeds history lines written as compact JSON to a [`View`], and to the
//! [`Situations`] fold just before the view, as the checkers' pass does.

use super::line::decode;
use super::situation::Situations;
use super::view::View;

pub const MS: u64 = 1_000_000;

pub struct Feed {
    pub view: View,
    pub situations: Situations,
    pos: u32,
}

impl Default for Feed {
    /// A view of n1..n3.
    fn default() -> Self {
        Self::of(3)
    }
}

impl Feed {
    pub fn new() -> Self {
        Self::default()
    }

    /// A view of n1..n`size`.
    pub fn of(size: usize) -> Self {
        let nodes: Vec<String> = (1..=size).map(|i| format!("n{i}")).collect();
        Feed {
            view: View::new(&nodes),
            situations: Situations::new(),
            pos: 0,
        }
    }

    pub fn line(&mut self, text: String) -> &mut Self {
        let l = decode(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        let e = self.view.of_line(self.pos, &l);
        self.situations.line(&self.view, &e, &l);
        self.view.feed(e);
        self.pos += 1;
        self
    }

    /// A status read of `node` at `ms`: "L" leading, "L-discovery", "L-sync", "F<k>" following
    /// n<k> in broadcast, "S<k>" following n<k> in sync, "D<k>" following n<k> in discovery,
    /// "?" looking.
    pub fn read(&mut self, ms: u64, node: u64, role: &str, epoch: u64) -> &mut Self {
        self.read_with(ms, node, role, epoch, "")
    }

    /// [`Feed::read`] of a node that reports config `version` of these voters (a reconfig's).
    pub fn read_under(
        &mut self,
        (ms, node, role, epoch): (u64, u64, &str, u64),
        version: u64,
        voters: &[u64],
    ) -> &mut Self {
        let config = format!(r#","config":{{"version":{version},"voters":{voters:?}}}"#);
        self.read_with(ms, node, role, epoch, &config)
    }

    /// [`Feed::read`] with `extra` fields (",\"name\":value...") in its value.
    fn read_with(&mut self, ms: u64, node: u64, role: &str, epoch: u64, extra: &str) -> &mut Self {
        let (state, leader, phase) = match role {
            "L" => ("LEADING", format!("{node}"), "broadcast"),
            "L-discovery" => ("LEADING", format!("{node}"), "discovery"),
            "L-sync" => ("LEADING", format!("{node}"), "sync"),
            "?" => ("LOOKING", "null".into(), "election"),
            s if s.starts_with('S') => ("FOLLOWING", s[1..].to_string(), "sync"),
            s if s.starts_with('D') => ("FOLLOWING", s[1..].to_string(), "discovery"),
            f => ("FOLLOWING", f[1..].to_string(), "broadcast"),
        };
        let text = format!(
            r#"{{"index":{},"time":{},"process":"n{node}","type":"ok","f":"status","node":"n{node}","value":{{"state":"{state}","leader":{leader},"peer_epoch":{epoch},"accepted_epoch":{epoch},"zab_phase":"{phase}","last_zxid":0,"last_committed_zxid":0{extra}}}}}"#,
            self.pos,
            ms * MS
        );
        self.line(text)
    }

    pub fn nemesis(&mut self, ms: u64, f: &str, value: &str) -> &mut Self {
        self.nemesis_event(ms, "info", f, value)
    }

    /// A nemesis action of type `kind` ("invoke": begun, "info": done).
    pub fn nemesis_event(&mut self, ms: u64, kind: &str, f: &str, value: &str) -> &mut Self {
        let text = format!(
            r#"{{"index":{},"time":{},"process":"nemesis","type":"{kind}","f":"{f}","value":{value}}}"#,
            self.pos,
            ms * MS
        );
        self.line(text)
    }

    /// A client write event of process `c` ("invoke", "ok", "fail", "info").
    pub fn write(&mut self, ms: u64, c: u64, kind: &str) -> &mut Self {
        let text = format!(
            r#"{{"index":{},"time":{},"process":"c{c}","type":"{kind}","f":"write","value":{{"value":"v{}","zxid":4294967297}}}}"#,
            self.pos,
            ms * MS,
            self.pos
        );
        self.line(text)
    }

    pub fn leader(&self, since_ms: u64) -> Option<(u64, u64)> {
        self.view
            .quorum_leader(since_ms * MS)
            .map(|l| (l.sid, l.epoch))
    }
}

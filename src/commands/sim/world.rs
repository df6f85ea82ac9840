//! The simulated cluster in virtual time: one queue of timed events (deliveries, timers,
//! observer reads, client ticks, nemesis steps), taken in (time, sequence) order, so a seed
//! gives one order of everything. Servers (`server.rs`) react; this file carries out their
//! effects over the simulated network (`net.rs`): election notices, Zab connections (FIFO per
//! direction, held while cut, as TCP holds them), dials, clients' writes and their answers.
//! The observers and clients record through `record.rs` exactly what the real ones record.

use super::codec;
use super::coverage::{self, Coverage};
use super::disk;
use super::net::{self, Net, Port};
use super::oracle::Oracle;
use super::record::SimRecorder;
use super::server::{Effect, Life, Server, WriteOutcome};
use super::streams::{Stream, Streams};
use crate::history::NodeExitValue;
use crate::history::{node_name, EventType, F};
use fle_node::wire::Notification;
use fle_node::zab::messages::Msg;
use rand::Rng;
use serde_json::json;
use std::any::Any;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

/// A run that handles more events than this, or holds more waiting, is cut short: a message
/// storm (votes that cycle, say) that real processes pace with their CPU and TCP but virtual
/// time does not. A default 60 s run of 5 nodes handles about 45,000 (2026-12-04), an hour of
/// 9 nodes a few million.
pub const MAX_EVENTS: u64 = 20_000_000;
pub const MAX_PENDING: usize = 2_000_000;

/// A link writer's time per notification (a frame's write and the task's next wake-up): the
/// pace at which `peers.rs`'s send slot can change what is on the wire. Votes put in the slot
/// faster than this are coalesced to the latest, as a busy writer coalesces them on real
/// processes; without it a storm of cycling votes (`vote-order-not-total`) grows without
/// bound in virtual time, where no CPU paces it.
pub const NOTE_WRITE_NS: u64 = 20_000;

/// An event in the queue: ordered by its time, then by when it was scheduled (so the same
/// seed handles events in the same order), never by the event itself.
#[derive(Debug)]
struct Due {
    time: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}

impl Eq for Due {}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.time, self.seq).cmp(&(other.time, other.seq))
    }
}

#[derive(Debug, Clone)]
pub enum Ev {
    Deliver {
        to: u64,
        wire: Wire,
    },
    ElectionTimer {
        node: u64,
        at: u64,
    },
    Beat {
        node: u64,
        attempt: u64,
        period: u64,
    },
    Dial {
        node: u64,
        attempt: u64,
        leader: u64,
        /// When this connect's first SYN went out, while the link drops them (it then
        /// waits for the kernel's retransmissions, `net::next_syn`); None: a new connect.
        syn_since: Option<u64>,
    },
    Read {
        node: u64,
    },
    /// A read of a stopped process gives up after the observer's timeout.
    ReadTimedOut {
        node: u64,
    },
    Client {
        id: usize,
    },
    ClientTimeout {
        op: u64,
    },
    /// `peers.rs`: an election connection that is down (dropped for `DEAD_AFTER` without
    /// acknowledgement, or cut by a partition that healed) is dialed again; the new
    /// connection carries both slots.
    NoteRedial {
        pair: (u64, u64),
        gen: u64,
    },
    /// `peers.rs`'s link writer for `from` -> `to` takes what its send slot holds now (the
    /// latest notification: the ones put there since its last write were replaced).
    SlotWrite {
        from: u64,
        to: u64,
    },
    /// A Zab connection's direction `dir` delivers what has arrived (see `Conn::queue`).
    Pump {
        conn: u64,
        dir: usize,
    },
}

#[derive(Debug, Clone)]
pub enum Wire {
    /// A notification's frame (`codec::note_frame`) on election connection `gen` of its pair
    /// (lost if that connection was replaced).
    Note {
        from: u64,
        frame: Vec<u8>,
        gen: u64,
    },
    /// A Zab message's frame (`codec::zab_frame`).
    Zab {
        conn: u64,
        frame: Vec<u8>,
    },
    Closed {
        conn: u64,
    },
    Write {
        op: u64,
        forwarded: bool,
    },
    Reply {
        op: u64,
        outcome: WriteOutcome,
    },
}

/// A Zab connection between a follower and its leader.
struct Conn {
    ends: [u64; 2],
    open: bool,
    /// Per direction (0: ends[0] -> ends[1]): the byte stream, messages sent and not yet
    /// delivered, in order, each with the earliest time it can arrive. Delivered in order
    /// while the link passes; while it is cut TCP retransmits in vain and they wait for the
    /// heal (fle-node sets no TCP_USER_TIMEOUT on Zab connections).
    queue: [VecDeque<(u64, Wire)>; 2],
    /// Per direction: a `Pump` is due.
    pumping: [bool; 2],
}

/// A client write in flight.
pub struct Op {
    pub client: usize,
    pub process: usize,
    pub value: u64,
    pub node: u64,
    pub done: bool,
}

pub struct Client {
    pub process: usize,
    pub busy: bool,
    pub last_tick: u64,
}

pub struct World {
    pub rec: SimRecorder,
    /// The run's randomness, a stream per purpose and per link (`streams.rs`).
    pub streams: Streams,
    pub net: Net,
    pub servers: BTreeMap<u64, Server>,
    /// The servers that only observe, by name (fault targets count voters).
    pub observers: Vec<String>,
    /// Events due, earliest first (by time, then by when they were scheduled).
    queue: BinaryHeap<Reverse<Due>>,
    seq: u64,
    /// Events handled so far (`MAX_EVENTS` ends a runaway run).
    pub handled: u64,
    /// When the run was cut short for too many events (see `MAX_EVENTS`), if it was.
    pub runaway: Option<u64>,
    /// `MAX_EVENTS`, or less (a test).
    pub max_events: u64,
    conns: BTreeMap<u64, Conn>,
    next_conn: u64,
    /// The election timer each server armed last (older ones are stale).
    timers: BTreeMap<u64, u64>,
    /// Events for a stopped process, replayed when it resumes; beats missed meanwhile.
    deferred: BTreeMap<u64, Vec<Ev>>,
    missed_beats: BTreeMap<u64, u64>,
    /// FIFO per directed election link.
    note_last: BTreeMap<(u64, u64), u64>,
    /// Per pair of servers (smaller sid first): which election connection is the current one.
    note_gen: BTreeMap<(u64, u64), u64>,
    /// Pairs whose election connection is down (died of `DEAD_AFTER`, or was cut by a
    /// partition) and waits for its redial; what is sent on them meanwhile waits in `slots`.
    note_dead: BTreeSet<(u64, u64)>,
    /// `peers.rs`'s send slot per directed link: the latest notification, sent again on every
    /// new connection (after a heal, or when the peer's process is back).
    slots: BTreeMap<(u64, u64), Notification>,
    /// Per directed link: the writer's next write is due (a `SlotWrite` is queued), so a
    /// notification put in the slot meanwhile replaces the one waiting there.
    slot_write_due: BTreeSet<(u64, u64)>,
    /// Per directed link: when the writer is done with its last write.
    writer_free: BTreeMap<(u64, u64), u64>,
    pub ops: BTreeMap<u64, Op>,
    pub clients: Vec<Client>,
    next_value: u64,
    /// Clients stop starting writes (the time limit passed).
    pub clients_stopped: bool,
    /// Per node: a wall-clock fault in force (offset ms, or a rate).
    pub clocks: BTreeMap<u64, crate::nemesis::faults::clock::ClockSkew>,
    pub client_timeout_ns: u64,
    pub client_period_ns: u64,
    pub read_period_ns: u64,
    pub status_timeout_ns: u64,
    /// The history's wall clock at time 0 (ms since the Unix epoch).
    pub wall_start_ms: i64,
    /// The ground truth's checks after every event (`oracle.rs`).
    pub oracle: Oracle,
    /// What the run reached, taken after every event when it is explored (`coverage.rs`).
    pub coverage: Option<Coverage>,
}

impl World {
    pub fn new(servers: BTreeMap<u64, Server>, streams: Streams, rec: SimRecorder) -> World {
        World {
            rec,
            streams,
            net: Net::default(),
            servers,
            observers: Vec::new(),
            queue: BinaryHeap::new(),
            handled: 0,
            runaway: None,
            max_events: MAX_EVENTS,
            seq: 0,
            conns: BTreeMap::new(),
            next_conn: 0,
            timers: BTreeMap::new(),
            deferred: BTreeMap::new(),
            missed_beats: BTreeMap::new(),
            note_last: BTreeMap::new(),
            note_gen: BTreeMap::new(),
            note_dead: BTreeSet::new(),
            slots: BTreeMap::new(),
            slot_write_due: BTreeSet::new(),
            writer_free: BTreeMap::new(),
            ops: BTreeMap::new(),
            clients: Vec::new(),
            next_value: 0,
            clients_stopped: false,
            clocks: BTreeMap::new(),
            client_timeout_ns: 0,
            client_period_ns: 0,
            read_period_ns: 0,
            status_timeout_ns: 0,
            wall_start_ms: 0,
            oracle: Oracle::default(),
            coverage: None,
        }
    }

    pub fn now(&self) -> u64 {
        self.rec.now
    }

    pub fn at(&mut self, time: u64, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse(Due {
            time: time.max(self.rec.now),
            seq: self.seq,
            ev,
        }));
    }

    /// The role's next beat (a leader's ping, a follower's silence check), one period on.
    fn next_beat(&mut self, node: u64, attempt: u64, period: u64) {
        let at = self.now() + period;
        self.at(
            at,
            Ev::Beat {
                node,
                attempt,
                period,
            },
        );
    }

    /// The next event due at or before `until`, with the clock moved to it.
    pub fn pop(&mut self, until: u64) -> Option<Ev> {
        if self.runaway.is_some()
            || self.handled >= self.max_events
            || self.queue.len() > MAX_PENDING
        {
            self.runaway.get_or_insert(self.rec.now);
            return None;
        }
        if self.queue.peek()?.0.time > until {
            return None;
        }
        let Reverse(due) = self.queue.pop()?;
        self.rec.now = due.time;
        self.handled += 1;
        Some(due.ev)
    }

    pub fn life(&self, sid: u64) -> Life {
        self.servers.get(&sid).map_or(Life::Down, |s| s.life)
    }

    /// Handles one event.
    pub fn handle(&mut self, ev: Ev) {
        let node = ev_node(&ev);
        let before = (self.coverage.is_some())
            .then(|| node.and_then(|sid| self.servers.get(&sid)))
            .flatten()
            .map(|s| (s.sid, coverage::place(s), coverage::input_of(&ev)));
        let handled = catch_unwind(AssertUnwindSafe(|| self.handle_one(ev)));
        let Err(panic) = handled else {
            let now = self.now();
            self.oracle.after_event(now, &self.servers);
            if let Some(c) = self.coverage.as_mut() {
                if let Some((sid, place, input)) = before {
                    c.transition(place, input, coverage::place(&self.servers[&sid]));
                }
                c.cluster(&self.servers);
            }
            return;
        };
        // A machine that panics takes its process down, as a real node's panic does: recorded
        // as its exit, so `crash` says so and the batch goes on. A panic of the simulator's
        // own (no server's event) is a bug here, and stays one.
        match node.filter(|&sid| self.life(sid) != Life::Down) {
            Some(sid) => self.exits(sid, &format!("panicked: {}", panic_message(&*panic))),
            None => resume_unwind(panic),
        }
    }

    fn handle_one(&mut self, ev: Ev) {
        let now = self.now();
        if let Some(node) = ev_node(&ev) {
            match self.life(node) {
                Life::Down => return self.lost(ev),
                Life::Paused => {
                    if let Ev::Beat {
                        node,
                        attempt,
                        period,
                    } = ev
                    {
                        *self.missed_beats.entry(node).or_default() += 1;
                        self.next_beat(node, attempt, period);
                    } else {
                        self.deferred.entry(node).or_default().push(ev);
                    }
                    return;
                }
                Life::Up => {}
            }
        }
        match ev {
            Ev::Deliver { to, wire } => self.deliver(to, wire),
            Ev::ElectionTimer { node, at } => {
                if self.timers.get(&node) == Some(&at) {
                    let e = self.server(node).on_election_timer(now);
                    self.apply(node, e);
                }
            }
            Ev::Beat {
                node,
                attempt,
                period,
            } => {
                let missed = self.missed_beats.remove(&node).unwrap_or(0);
                if self.servers[&node].attempt() == attempt {
                    let e = self.server(node).on_beat(now, attempt, missed + 1);
                    self.apply(node, e);
                    if self.servers[&node].attempt() == attempt {
                        self.next_beat(node, attempt, period);
                    }
                }
            }
            Ev::Dial {
                node,
                attempt,
                leader,
                syn_since,
            } => self.dial(node, attempt, leader, syn_since),
            Ev::Read { node } => self.read(node),
            Ev::ReadTimedOut { node } => {
                self.rec
                    .status(&node_name(node), Err((EventType::Info, "timed out".into())));
                self.at(now + self.read_period_ns, Ev::Read { node });
            }
            Ev::Client { id } => self.client_tick(id),
            Ev::ClientTimeout { op } => {
                self.finish_op(op, WriteOutcome::Unknown("timed out".into()))
            }
            Ev::NoteRedial { pair, gen } => self.note_redial(pair, gen),
            Ev::SlotWrite { from, to } => self.slot_write(from, to),
            Ev::Pump { conn, dir } => self.pump(conn, dir),
        }
    }

    /// An event for a process that is not running: a message is lost, a timer dies with it.
    fn lost(&mut self, ev: Ev) {
        if let Ev::Deliver {
            wire: Wire::Write { op, .. },
            ..
        } = ev
        {
            self.finish_op(op, WriteOutcome::Unknown("connection reset".into()));
        }
    }

    fn server(&mut self, sid: u64) -> &mut Server {
        self.servers.get_mut(&sid).expect("a server of the cluster")
    }

    fn deliver(&mut self, to: u64, wire: Wire) {
        let now = self.now();
        let effects = match wire {
            Wire::Note { from, gen, .. } if gen != self.gen_of(from, to) => vec![],
            // Cut on its way: the pair's reconnection after the heal sends the slot again.
            Wire::Note { from, .. } if !self.net.passes(from, to, Port::Election) => vec![],
            Wire::Note { from, frame, .. } => {
                let n = codec::read_note(&frame);
                self.server(to).on_notification(now, from, n)
            }
            Wire::Zab { conn, frame } => {
                let msg = codec::read_zab(&frame);
                self.server(to).on_frame(now, conn, msg)
            }
            Wire::Closed { conn } => self.server(to).on_closed(now, conn),
            Wire::Write { op, forwarded } => self.write_arrives(to, op, forwarded),
            Wire::Reply { op, outcome } => {
                self.finish_op(op, outcome);
                vec![]
            }
        };
        self.apply(to, effects);
    }

    /// Carries out what server `sid` asked for (nothing after its exit).
    pub fn apply(&mut self, sid: u64, effects: Vec<Effect>) {
        let now = self.now();
        // How long the server's loop has waited on fsyncs so far: what it does after one
        // happens once that fsync is done.
        let mut after = 0;
        for e in effects {
            match e {
                Effect::Exit { why } => return self.exits(sid, &why),
                Effect::Fsync => after += disk::fsync_ns(self.streams.of(Stream::Fsync { sid })),
                Effect::Notify { to, n } => {
                    // `Peers::send`: into the slot, replacing what the writer has not taken.
                    self.slots.insert((sid, to), n);
                    if self.slot_write_due.insert((sid, to)) {
                        let free = self.writer_free.get(&(sid, to)).copied().unwrap_or(0);
                        self.at(free.max(now + after), Ev::SlotWrite { from: sid, to });
                    }
                }
                Effect::Zab { conn, msg } => {
                    if let (Msg::Ack { zxid }, Some(s)) = (&msg, self.servers.get(&sid)) {
                        self.oracle.on_ack(now, sid, *zxid, s);
                    }
                    let frame = codec::zab_frame(&msg);
                    self.send_on(conn, sid, Wire::Zab { conn, frame }, after)
                }
                Effect::Close { conn } => self.close(conn, sid, after),
                Effect::Dial {
                    leader,
                    attempt,
                    at,
                } => self.at(
                    at,
                    Ev::Dial {
                        node: sid,
                        attempt,
                        leader,
                        syn_since: None,
                    },
                ),
                Effect::Reply { op, outcome } => self.reply(sid, op, outcome, after),
                Effect::ElectionTimer { at } => {
                    self.timers.insert(sid, at);
                    self.at(at, Ev::ElectionTimer { node: sid, at });
                }
                Effect::Beat { period_ns, attempt } => self.at(
                    now + after + period_ns,
                    Ev::Beat {
                        node: sid,
                        attempt,
                        period: period_ns,
                    },
                ),
            }
        }
    }

    /// The link writer of `from` -> `to` writes its slot's notification, and is busy for
    /// `NOTE_WRITE_NS`: what `from` sends meanwhile waits in the slot, newer replacing older.
    fn slot_write(&mut self, from: u64, to: u64) {
        self.slot_write_due.remove(&(from, to));
        let Some(n) = self.slots.get(&(from, to)).cloned() else {
            return;
        };
        if self.life(to) != Life::Down && self.net.passes(from, to, Port::Election) {
            self.writer_free
                .insert((from, to), self.now() + NOTE_WRITE_NS);
            self.send_note(from, to, n, 0);
        }
    }

    /// How long a client's request to its server, or the reply back, takes: 0.1-0.4 ms on the
    /// client's own connection, from that client's stream.
    fn client_latency(&mut self, client: usize) -> u64 {
        (self.streams.of(Stream::Client { client })).gen_range(100_000..400_000)
    }

    /// How long a message from `from` to `to` takes now, from that link's own stream.
    fn latency(&mut self, from: u64, to: u64) -> u64 {
        self.net
            .latency(from, to, self.streams.of(Stream::Link { from, to }))
    }

    fn send_note(&mut self, from: u64, to: u64, n: Notification, after: u64) {
        let now = self.now();
        let pair = (from.min(to), from.max(to));
        if self.note_dead.contains(&pair) {
            // The slot goes out on the connection that replaces the dead one.
            return;
        }
        let lat = self.latency(from, to);
        let dead_after = fle_node::peers::DEAD_AFTER.as_nanos() as u64;
        if lat > dead_after {
            // Unacknowledged for DEAD_AFTER (TCP_USER_TIMEOUT): the connection is dropped,
            // with what it still held both ways, and dialed again.
            self.note_dead.insert(pair);
            let gen = self.gen_of(from, to);
            let redial = self.streams.of(Stream::Redial { pair });
            let at = now + after + dead_after + redial.gen_range(0..redial_ns());
            self.at(at, Ev::NoteRedial { pair, gen });
            return;
        }
        let last = self.note_last.entry((from, to)).or_default();
        let t = (now + after + lat).max(*last);
        *last = t;
        let gen = self.gen_of(from, to);
        self.at(
            t,
            Ev::Deliver {
                to,
                wire: Wire::Note {
                    from,
                    frame: codec::note_frame(&n),
                    gen,
                },
            },
        );
    }

    /// The current election connection of the pair `a`, `b`.
    fn gen_of(&self, a: u64, b: u64) -> u64 {
        self.note_gen
            .get(&(a.min(b), a.max(b)))
            .copied()
            .unwrap_or(0)
    }

    /// The pair's election connection is replaced: what the old one still carried is lost.
    fn new_note_conn(&mut self, (a, b): (u64, u64)) {
        *self.note_gen.entry((a, b)).or_default() += 1;
        self.note_dead.remove(&(a, b));
        self.note_last.remove(&(a, b));
        self.note_last.remove(&(b, a));
    }

    /// A dead election connection is dialed again: when both ends run and the link passes,
    /// the new connection sends each side's slot as it is now. A link cut again meanwhile
    /// stays down (the heal that ends that cut dials it again); a process down has its links
    /// brought back by its start, a stopped one by its resume.
    fn note_redial(&mut self, pair: (u64, u64), gen: u64) {
        if self.gen_of(pair.0, pair.1) != gen || !self.note_dead.contains(&pair) {
            return;
        }
        let (a, b) = pair;
        if self.life(a) == Life::Down || self.life(b) == Life::Down {
            self.new_note_conn(pair);
            return;
        }
        if !(self.net.passes(a, b, Port::Election) && self.net.passes(b, a, Port::Election)) {
            return;
        }
        if self.life(a) == Life::Paused || self.life(b) == Life::Paused {
            // A stopped process neither dials nor accepts, and sends no slot: the pair stays
            // down until it resumes (`resume` dials it again).
            return;
        }
        self.new_note_conn(pair);
        for (from, to) in [(a, b), (b, a)] {
            if let Some(n) = self.slots.get(&(from, to)).cloned() {
                self.send_note(from, to, n, 0);
            }
        }
    }

    /// Pairs of servers whose election connection a partition cuts now (either way).
    pub fn election_cuts(&self) -> BTreeSet<(u64, u64)> {
        let sids: Vec<u64> = self.servers.keys().copied().collect();
        let mut cut = BTreeSet::new();
        for (i, a) in sids.iter().enumerate() {
            for b in &sids[i + 1..] {
                if !self.net.passes(*a, *b, Port::Election)
                    || !self.net.passes(*b, *a, Port::Election)
                {
                    cut.insert((*a, *b));
                }
            }
        }
        cut
    }

    /// Election links that were cut (`cut`: pairs, smaller sid first) are dialed again:
    /// `peers.rs` re-dials a down link at least every `CONNECT_TIMEOUT + BACKOFF_MAX`, and
    /// the one connection of the pair, once up, sends both sides' slots (the latest
    /// notification each holds then). Until that redial, what is sent on the pair waits in
    /// its slots; a redial that finds the link cut again sends nothing. Links the fault did
    /// not cut kept their connection: nothing is sent again on them.
    fn reconnect_elections(&mut self, cut: &BTreeSet<(u64, u64)>) {
        let now = self.now();
        for &(a, b) in cut {
            if self.life(a) == Life::Down || self.life(b) == Life::Down {
                continue; // A restarted server's `start` reconnects its links.
            }
            self.note_dead.insert((a, b));
            let gen = self.gen_of(a, b);
            let redial = self.streams.of(Stream::Redial { pair: (a, b) });
            let at = now + redial.gen_range(0..redial_ns());
            self.at(at, Ev::NoteRedial { pair: (a, b), gen });
        }
    }

    /// `from` sends `wire` on `conn`, `after` ns from now (its loop's fsync first).
    fn send_on(&mut self, conn: u64, from: u64, wire: Wire, after: u64) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        if !c.open && !matches!(wire, Wire::Closed { .. }) {
            return;
        }
        let dir = usize::from(c.ends[0] != from);
        let to = c.ends[1 - dir];
        let lat = self.latency(from, to);
        let now = self.now();
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let prev = c.queue[dir].back().map_or(0, |(t, _)| *t);
        let t = (now + after + lat).max(prev);
        c.queue[dir].push_back((t, wire));
        if !c.pumping[dir] {
            c.pumping[dir] = true;
            self.at(t, Ev::Pump { conn, dir });
        }
    }

    /// Delivers, in order, what arrived on `conn`'s direction `dir` by now, unless the link is
    /// cut now (then the heal pumps again); the next message sets the next pump.
    fn pump(&mut self, conn: u64, dir: usize) {
        let now = self.now();
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.pumping[dir] = false;
        let (from, to) = (c.ends[dir], c.ends[1 - dir]);
        if !self.net.passes(from, to, Port::Quorum) {
            return;
        }
        let mut due = Vec::new();
        while c.queue[dir].front().is_some_and(|(t, _)| *t <= now) {
            due.extend(c.queue[dir].pop_front().map(|(_, w)| w));
        }
        let next = c.queue[dir].front().map(|(t, _)| *t);
        if let Some(t) = next {
            c.pumping[dir] = true;
            self.at(t, Ev::Pump { conn, dir });
        }
        for wire in due {
            self.handle(Ev::Deliver { to, wire });
        }
    }

    /// `by` closes `conn`, `after` ns from now: the other end learns it as TCP would (after
    /// the latency, or after the heal when the link is cut).
    pub fn close(&mut self, conn: u64, by: u64, after: u64) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if !c.open {
            return;
        }
        c.open = false;
        self.send_on(conn, by, Wire::Closed { conn }, after);
    }

    /// After a heal: what TCP held on the links that pass again goes out, in order (TCP's
    /// retransmission, a latency after the heal); election links among `cut` (the pairs cut
    /// before the heal) reconnect.
    pub fn release_held(&mut self, cut: &BTreeSet<(u64, u64)>) {
        let now = self.now();
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            for dir in 0..2 {
                let Some(c) = self.conns.get(&id) else {
                    continue;
                };
                let (from, to) = (c.ends[dir], c.ends[1 - dir]);
                if c.pumping[dir]
                    || c.queue[dir].is_empty()
                    || !self.net.passes(from, to, Port::Quorum)
                {
                    continue;
                }
                let lat = self.latency(from, to);
                if let Some(c) = self.conns.get_mut(&id) {
                    c.pumping[dir] = true;
                }
                self.at(now + lat, Ev::Pump { conn: id, dir });
            }
        }
        // A closed connection whose close was delivered needs nothing more.
        self.conns
            .retain(|_, c| c.open || c.queue.iter().any(|q| !q.is_empty()));
        self.reconnect_elections(cut);
    }

    /// `follow.rs`'s `connect`: the follower dials its leader until its deadline. A leader
    /// whose process is down refuses at once (the reset of a closed port) and is dialed again
    /// `DIAL_RETRY` later; a link that drops packets (a partition) drops the SYNs too, so the
    /// connect waits for the kernel's retransmissions and connects at the first after the heal.
    fn dial(&mut self, node: u64, attempt: u64, leader: u64, syn_since: Option<u64>) {
        let now = self.now();
        let Some((_, deadline)) = self.servers[&node].following(attempt) else {
            return;
        };
        if now >= deadline {
            let e = self.server(node).dial_failed(now, leader);
            self.apply(node, e);
            return;
        }
        let passes = self.net.passes(node, leader, Port::Quorum)
            && self.net.passes(leader, node, Port::Quorum);
        let dial_retry = fle_node::zab::DIAL_RETRY.as_nanos() as u64;
        let (at, syn_since) = if !passes {
            let since = syn_since.unwrap_or(now);
            match net::next_syn(since, now) {
                Some(at) => (at, Some(since)),
                // Its retransmissions spent, the connect fails; a new one follows.
                None => (since + net::SYN_GIVE_UP_NS + dial_retry, None),
            }
        } else if self.life(leader) == Life::Down {
            (now + dial_retry, None)
        } else {
            self.next_conn += 1;
            let id = self.next_conn;
            self.conns.insert(
                id,
                Conn {
                    ends: [node, leader],
                    open: true,
                    queue: [VecDeque::new(), VecDeque::new()],
                    pumping: [false, false],
                },
            );
            let e = self.server(node).connected(now, id);
            self.apply(node, e);
            return;
        };
        // The connect gives up at the deadline (tokio's timeout), whatever its SYNs do.
        self.at(
            at.min(deadline),
            Ev::Dial {
                node,
                attempt,
                leader,
                syn_since,
            },
        );
    }

    /// A process exits by itself (its store refused a write, its machine panicked): it dies
    /// as a kill makes it, and the history gets the `node-exit` the controller records for a
    /// real process that exited unasked (what `crash` judges), with the error as its log tail.
    pub fn exits(&mut self, sid: u64, why: &str) {
        self.kill(sid);
        let name = node_name(sid);
        let value = NodeExitValue {
            status: Some(1),
            log_tail: vec![format!("ERROR fle-node: {why}")],
            ..Default::default()
        };
        let value = serde_json::to_value(value).unwrap_or_default();
        (self.rec).record(&name, EventType::Info, F::NodeExit, Some(&name), value);
    }

    /// A process dies: its connections reset, its writes answered as unknown.
    pub fn kill(&mut self, sid: u64) {
        let (conns, ops) = self.server(sid).kill();
        self.slots.retain(|(from, _), _| *from != sid);
        // Its link writers die with it, and the writes they had due.
        self.slot_write_due.retain(|(from, _)| *from != sid);
        self.writer_free.retain(|(from, _), _| *from != sid);
        // Its election connections die with it (a pending redial among them is moot).
        let pairs: Vec<(u64, u64)> = (self.note_dead.iter())
            .filter(|(a, b)| *a == sid || *b == sid)
            .copied()
            .collect();
        for p in pairs {
            self.new_note_conn(p);
        }
        self.deferred.remove(&sid);
        self.missed_beats.remove(&sid);
        self.timers.remove(&sid);
        for c in conns {
            self.close(c, sid, 0);
        }
        // Every connection with this end is gone with the process.
        let mine: Vec<u64> = (self.conns.iter())
            .filter(|(_, c)| c.open && c.ends.contains(&sid))
            .map(|(id, _)| *id)
            .collect();
        for c in mine {
            self.close(c, sid, 0);
        }
        for op in ops {
            self.finish_op(op, WriteOutcome::Unknown("connection reset".into()));
        }
        let waiting: Vec<u64> = (self.ops.iter())
            .filter(|(_, o)| !o.done && o.node == sid)
            .map(|(id, _)| *id)
            .collect();
        for op in waiting {
            self.finish_op(op, WriteOutcome::Unknown("connection reset".into()));
        }
    }

    pub fn start(&mut self, sid: u64) {
        let now = self.now();
        let e = self.server(sid).start(now);
        self.apply(sid, e);
        // Its peers' links to it come back, with their slots: the new process dials the
        // smaller sids and pokes the larger ones, which dial back at once (`peers.rs`), so a
        // connection takes a round trip, not a re-dial period.
        let waiting: Vec<(u64, Notification)> = (self.slots.iter())
            .filter(|((_, to), _)| *to == sid)
            .map(|((from, _), n)| (*from, n.clone()))
            .collect();
        for (from, n) in waiting {
            if self.life(from) == Life::Up && self.net.passes(from, sid, Port::Election) {
                let after = self.latency(sid, from);
                self.send_note(from, sid, n, after);
            }
        }
    }

    pub fn pause(&mut self, sid: u64) {
        self.server(sid).life = Life::Paused;
    }

    pub fn resume(&mut self, sid: u64) {
        let now = self.now();
        self.server(sid).life = Life::Up;
        for ev in self.deferred.remove(&sid).unwrap_or_default() {
            self.at(now, ev);
        }
        // Its election links that went down meanwhile connect now (the dial or accept it was
        // stopped in goes ahead), and each side sends its slot.
        let dead: Vec<(u64, u64)> = (self.note_dead.iter())
            .filter(|(a, b)| *a == sid || *b == sid)
            .copied()
            .collect();
        for pair in dead {
            let gen = self.gen_of(pair.0, pair.1);
            self.at(now, Ev::NoteRedial { pair, gen });
        }
    }

    fn wall_ms(&self, sid: u64) -> i64 {
        let now = self.now();
        let base = self.wall_start_ms + (now / 1_000_000) as i64;
        base + self.clocks.get(&sid).map_or(0, |c| c.offset_ms(now))
    }

    /// An observer's read of `/status`, then the next one.
    fn read(&mut self, node: u64) {
        let now = self.now();
        let name = node_name(node);
        match self.life(node) {
            Life::Up => {
                let wall = self.wall_ms(node);
                let s = self.servers[&node].status(now, wall);
                self.rec.status(&name, Ok(s));
                self.at(now + self.read_period_ns, Ev::Read { node });
            }
            Life::Paused => {
                // The read waits out its timeout, recorded when it gives up.
                self.at(now + self.status_timeout_ns, Ev::ReadTimedOut { node });
            }
            Life::Down => {
                self.rec
                    .status(&name, Err((EventType::Fail, "connection refused".into())));
                self.at(now + self.read_period_ns, Ev::Read { node });
            }
        }
    }

    /// A client's tick: one write through the leader the observers name (`workload::writes`).
    fn client_tick(&mut self, id: usize) {
        let now = self.now();
        if self.clients_stopped || self.clients[id].busy {
            return;
        }
        self.clients[id].busy = true;
        self.clients[id].last_tick = now;
        self.next_value += 1;
        let value = self.next_value;
        let leader = self
            .rec
            .observations
            .leader(now, 1_000_000_000)
            .map(|(n, _)| n);
        let p = self.clients[id].process.to_string();
        self.rec.record(
            &p,
            EventType::Invoke,
            F::Write,
            leader.as_deref(),
            json!({ "value": value }),
        );
        let op = self.ops.len() as u64 + 1;
        let node = leader.as_deref().and_then(crate::history::sid_of);
        self.ops.insert(
            op,
            Op {
                client: id,
                process: self.clients[id].process,
                value,
                node: node.unwrap_or(0),
                done: false,
            },
        );
        let Some(node) = node else {
            self.finish_op(
                op,
                WriteOutcome::Rejected("no leader known; not sent".into()),
            );
            return;
        };
        let lat = self.client_latency(id);
        self.at(
            now + lat,
            Ev::Deliver {
                to: node,
                wire: Wire::Write {
                    op,
                    forwarded: false,
                },
            },
        );
        self.at(now + self.client_timeout_ns, Ev::ClientTimeout { op });
    }

    fn write_arrives(&mut self, at: u64, op: u64, forwarded: bool) -> Vec<Effect> {
        let now = self.now();
        let Some(o) = self.ops.get(&op).filter(|o| !o.done) else {
            return vec![];
        };
        let value = json!(o.value);
        match self.server(at).on_write(now, op, value) {
            Ok(effects) => effects,
            Err(leader) if !forwarded => {
                if self.life(leader) != Life::Down && self.net.passes(at, leader, Port::Client) {
                    let lat = self.latency(at, leader);
                    self.at(
                        now + lat,
                        Ev::Deliver {
                            to: leader,
                            wire: Wire::Write {
                                op,
                                forwarded: true,
                            },
                        },
                    );
                }
                vec![]
            }
            // A forwarded write reached a follower: it does not forward twice (503).
            Err(_) => vec![Effect::Reply {
                op,
                outcome: WriteOutcome::Rejected("not the leader".into()),
            }],
        }
    }

    /// `sid` answers `op`: back to the client, through the server the client wrote to.
    fn reply(&mut self, sid: u64, op: u64, outcome: WriteOutcome, after: u64) {
        let now = self.now();
        let Some(o) = self.ops.get(&op) else { return };
        let (via, client) = (o.node, o.client);
        if via != sid && !self.net.passes(sid, via, Port::Client) {
            return; // Lost on the way: the client times out.
        }
        let lat = self.client_latency(client);
        // The client's own connection: not cut by partitions between servers.
        self.at(
            now + after + lat,
            Ev::Deliver {
                to: via,
                wire: Wire::Reply { op, outcome },
            },
        );
    }

    /// Records a write's outcome once and frees its client.
    pub fn finish_op(&mut self, op: u64, outcome: WriteOutcome) {
        let now = self.now();
        let Some(o) = self.ops.get_mut(&op).filter(|o| !o.done) else {
            return;
        };
        o.done = true;
        let (client, process, value, node) = (o.client, o.process, o.value, o.node);
        let node_name = (node > 0).then(|| node_name(node));
        let (kind, v) = match outcome {
            WriteOutcome::Committed(zxid) => {
                (EventType::Ok, json!({ "value": value, "zxid": zxid }))
            }
            WriteOutcome::Rejected(error) => {
                (EventType::Fail, json!({ "value": value, "error": error }))
            }
            WriteOutcome::Unknown(error) => {
                (EventType::Info, json!({ "value": value, "error": error }))
            }
        };
        self.rec.record(
            &process.to_string(),
            kind,
            F::Write,
            node_name.as_deref(),
            v,
        );
        let concurrency = self.clients.len();
        let c = &mut self.clients[client];
        c.busy = false;
        if kind == EventType::Info {
            c.process += concurrency;
        }
        // `workload::writes`'s interval with delayed missed ticks.
        let next = (self.clients[client].last_tick + self.client_period_ns).max(now);
        self.at(next, Ev::Client { id: client });
    }

    /// Whether any client write is still in flight.
    pub fn writes_in_flight(&self) -> bool {
        self.clients.iter().any(|c| c.busy)
    }

    pub fn start_clients(&mut self, n: usize) {
        for id in 0..n {
            self.clients.push(Client {
                process: id,
                busy: false,
                last_tick: 0,
            });
            let first = self.client_period_ns * (id as u64 + 1) / n as u64;
            self.at(first, Ev::Client { id });
        }
    }
}

/// `peers.rs`: a down election link is dialed again within `CONNECT_TIMEOUT + BACKOFF_MAX`.
fn redial_ns() -> u64 {
    (fle_node::peers::CONNECT_TIMEOUT.as_nanos() as u64) + 250_000_000
}

/// The server an event happens at, if it is one (reads and clients are the controller's).
fn ev_node(ev: &Ev) -> Option<u64> {
    match ev {
        Ev::Deliver { to, wire } => match wire {
            // A reply travels to the client through its server; the client hears of a dead
            // server by its connection's reset (`lost`).
            Wire::Reply { .. } => None,
            _ => Some(*to),
        },
        Ev::ElectionTimer { node, .. }
        | Ev::Beat { node, .. }
        | Ev::Dial { node, .. }
        | Ev::SlotWrite { from: node, .. } => Some(*node),
        Ev::Read { .. }
        | Ev::ReadTimedOut { .. }
        | Ev::Client { .. }
        | Ev::ClientTimeout { .. }
        | Ev::NoteRedial { .. }
        | Ev::Pump { .. } => None,
    }
}

/// What a caught panic said (its `&str` or `String` payload).
fn panic_message(panic: &(dyn Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(s), _) => s.to_string(),
        (_, Some(s)) => s.clone(),
        _ => "a panic without a message".into(),
    }
}

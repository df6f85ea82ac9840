//! The search behind `linearizable`: is one key's history of operations linearizable against
//! the versioned register (a ZooKeeper znode)? An exact search in Wing and Gong's style, with
//! Lowe's cache, as Porcupine does it: the calls and returns in one linked list in time order;
//! the first call whose operation the register allows is taken (lifted out of the list) and the
//! search goes on from the head; a return reached means its operation could not be placed
//! before it, so the last choice is undone (backtracking). A (linearized set, register state)
//! seen before is not explored again.
//!
//! An operation whose outcome is unknown (`info`, or never completed) returns at the end of the
//! history, after every known one, and may also never take effect: once only such returns
//! remain, the history is linearizable (the remaining ones are dropped).
//!
//! The register's versions prune what unknown writes may do. Every write that takes effect
//! leaves a new version, one more than the last, so no two writes leave the same one: an
//! unknown write is never placed where it would leave a version a known write left, nor above
//! every version the known operations showed (nothing after it could then be placed: the same as
//! never). Without this, each unknown write that never took effect doubled the orders tried.
//!
//! The cache keeps, per (set, state), one 128-bit hash: the xor of a random key per linearized
//! operation (Zobrist's hashing, kept as operations are lifted and put back) mixed with the
//! state's. 16 bytes a state instead of a bitset of every operation of the key; two different
//! (set, state) pairs collide with odds of about 2^-128 each, which could only leave a branch
//! unexplored. The budget bounds the states kept (memory) and the steps taken (time); beyond
//! it the verdict is unknown, never a pass.

use crate::checker::fxhash::FastSet;
use serde::{Deserialize, Serialize};

/// A key's state: its value and version (`version` -1, `value` None: no such key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct State {
    pub value: Option<i64>,
    pub version: i64,
}

impl State {
    pub const ABSENT: State = State {
        value: None,
        version: -1,
    };
}

/// What an operation asks of the register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Makes the key at version 0: only when it is absent.
    Create(i64),
    /// Writes the key (adds one to its version): only when it exists.
    Set(i64),
    /// Writes the key only when its version is `expect`.
    Cas { expect: i64, value: i64 },
    /// Returns (value, version); changes nothing.
    Read,
}

/// One operation of a key, as the search takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    pub action: Action,
    /// The state the operation showed when it completed `ok`: a read's (value, version), a
    /// write's (value written, version it left); None when its outcome is unknown, or an
    /// acknowledged write did not say its version.
    pub seen: Option<State>,
    /// Its invocation: (time, history position).
    pub call: (u64, u32),
    /// Its completion, None when its outcome is unknown (it returns at the end of the history).
    pub ret: Option<(u64, u32)>,
}

/// The register: the state after `action` on `s`, if it can happen there and shows what `seen`
/// says it showed.
pub fn step(s: State, action: Action, seen: Option<State>) -> Option<State> {
    let written = |value| State {
        value: Some(value),
        version: s.version + 1,
    };
    let next = match action {
        Action::Create(value) if s.version < 0 => State {
            value: Some(value),
            version: 0,
        },
        Action::Set(value) if s.version >= 0 => written(value),
        Action::Cas { expect, value } if s.version >= 0 && s.version == expect => written(value),
        Action::Read => s,
        _ => return None,
    };
    match seen {
        Some(shown) if shown != next => None,
        _ => Some(next),
    }
}

/// How far the search may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// (set, state) pairs kept in the cache: 16 bytes each, about 32 at the table's worst fill.
    pub states: u64,
    /// Entries looked at in the list.
    pub steps: u64,
}

impl Budget {
    /// A budget of `states`, with room for 64 looks per state.
    pub fn of_states(states: u64) -> Budget {
        Budget {
            states,
            steps: states.saturating_mul(64),
        }
    }
}

/// Where the search got furthest before it had to undo: the operations it had ordered (the
/// last `TAIL` of them), the state they left, and the operation that could not follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// How many operations were ordered.
    pub depth: usize,
    /// The last of them, oldest first (indices into the ops).
    pub tail: Vec<usize>,
    pub state: State,
    /// The operation whose completion came before any order could place it.
    pub op: usize,
    /// (set, state) pairs the search kept, in all.
    pub states: u64,
}

/// How many of the ordered operations a `Blocked` keeps.
pub const TAIL: usize = 4;

/// The search's answer for one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Linearizable {
        states: u64,
    },
    NotLinearizable(Blocked),
    /// The budget ran out: (states kept, steps taken, most operations ordered).
    GaveUp {
        states: u64,
        steps: u64,
        depth: usize,
    },
}

/// One entry of the list: an operation's call or return.
#[derive(Clone, Copy)]
struct Entry {
    op: usize,
    is_return: bool,
}

/// The doubly linked list of entries, with a sentinel at `HEAD` (index 0; entry i is at i + 1).
struct List {
    entries: Vec<Entry>,
    next: Vec<usize>,
    prev: Vec<usize>,
    /// Per operation: its call's and its return's place in the list.
    at: Vec<(usize, usize)>,
}

const HEAD: usize = 0;

impl List {
    /// Calls and returns in time order: a call before a return of the same time (both are then
    /// taken as concurrent), returns of unknown outcome last.
    fn of(ops: &[Op]) -> List {
        let mut order: Vec<(u64, bool, u32, Entry)> = Vec::with_capacity(2 * ops.len());
        for (op, o) in ops.iter().enumerate() {
            let call = Entry {
                op,
                is_return: false,
            };
            order.push((o.call.0, false, o.call.1, call));
            let (t, pos) = o.ret.unwrap_or((u64::MAX, u32::MAX));
            let ret = Entry {
                op,
                is_return: true,
            };
            order.push((t, true, pos, ret));
        }
        order.sort_by_key(|&(t, is_return, pos, _)| (t, is_return, pos));
        let n = order.len();
        let mut at = vec![(0, 0); ops.len()];
        let mut entries = Vec::with_capacity(n + 1);
        entries.push(Entry {
            op: usize::MAX,
            is_return: false,
        });
        for (i, (_, _, _, e)) in order.into_iter().enumerate() {
            match e.is_return {
                false => at[e.op].0 = i + 1,
                true => at[e.op].1 = i + 1,
            }
            entries.push(e);
        }
        List {
            entries,
            // Past the last entry: index n + 1, the end.
            next: (1..=n + 1).collect(),
            prev: (0..=n).map(|i| i.wrapping_sub(1)).collect(),
            at,
        }
    }

    fn end(&self) -> usize {
        self.entries.len()
    }

    fn unlink(&mut self, i: usize) {
        let (p, n) = (self.prev[i], self.next[i]);
        self.next[p] = n;
        if n != self.end() {
            self.prev[n] = p;
        }
    }

    fn relink(&mut self, i: usize) {
        let (p, n) = (self.prev[i], self.next[i]);
        self.next[p] = i;
        if n != self.end() {
            self.prev[n] = i;
        }
    }

    /// Takes an operation out: its call and its return.
    fn lift(&mut self, op: usize) {
        let (call, ret) = self.at[op];
        self.unlink(call);
        self.unlink(ret);
    }

    /// Puts it back, in the reverse order of `lift`.
    fn unlift(&mut self, op: usize) {
        let (call, ret) = self.at[op];
        self.relink(ret);
        self.relink(call);
    }
}

/// splitmix64: the random keys, deterministic per operation.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn key_of_op(op: usize) -> u128 {
    let i = op as u64;
    (u128::from(mix(2 * i)) << 64) | u128::from(mix(2 * i + 1))
}

fn key_of_state(s: State) -> u128 {
    let v = s.value.map_or(0x5eed, |v| mix(v as u64 ^ 0xa5a5));
    let h = mix(v ^ mix(s.version as u64));
    (u128::from(h) << 64) | u128::from(mix(h))
}

/// The search's moving parts.
struct Search<'a> {
    ops: &'a [Op],
    list: List,
    /// (operation, state before it), in the order taken.
    stack: Vec<(usize, State)>,
    state: State,
    /// The xor of the keys of the operations on the stack.
    set_hash: u128,
    seen: FastSet<u128>,
    best: Option<Blocked>,
    versions: Versions,
}

/// The versions the known operations showed (see the module's comment).
struct Versions {
    /// Left by known writes.
    left: FastSet<i64>,
    /// The highest any known operation showed, when every known operation showed its version.
    cap: Option<i64>,
}

impl Versions {
    fn of(ops: &[Op]) -> Versions {
        let known = || ops.iter().filter(|o| o.ret.is_some());
        let left = (known().filter(|o| o.action != Action::Read))
            .filter_map(|o| o.seen.map(|s| s.version))
            .collect();
        let all_shown = known().all(|o| o.seen.is_some());
        let highest = known().filter_map(|o| o.seen.map(|s| s.version)).max();
        Versions {
            left,
            cap: if all_shown {
                highest.or(Some(-1))
            } else {
                None
            },
        }
    }

    /// Whether an unknown write may leave `version`.
    fn open(&self, version: i64) -> bool {
        !self.left.contains(&version) && self.cap.is_none_or(|cap| version <= cap)
    }
}

impl Search<'_> {
    /// Takes `op` if the register allows it here and the (set, state) it leads to is new.
    fn try_take(&mut self, op: usize) -> bool {
        let o = &self.ops[op];
        let Some(next) = step(self.state, o.action, o.seen) else {
            return false;
        };
        let unknown_write = o.ret.is_none() && o.action != Action::Read;
        if unknown_write && !self.versions.open(next.version) {
            return false;
        }
        let set_hash = self.set_hash ^ key_of_op(op);
        if !self.seen.insert(set_hash ^ key_of_state(next)) {
            return false;
        }
        self.stack.push((op, self.state));
        self.state = next;
        self.set_hash = set_hash;
        self.list.lift(op);
        true
    }

    /// `op`'s return was reached unplaced: notes how far this order got, undoes the last
    /// choice and gives the entry to look at next (None: nothing left to undo).
    fn undo(&mut self, op: usize) -> Option<usize> {
        if self
            .best
            .as_ref()
            .is_none_or(|b| self.stack.len() > b.depth)
        {
            let from = self.stack.len().saturating_sub(TAIL);
            self.best = Some(Blocked {
                depth: self.stack.len(),
                tail: self.stack[from..].iter().map(|(op, _)| *op).collect(),
                state: self.state,
                op,
                states: 0,
            });
        }
        let (last, before) = self.stack.pop()?;
        self.state = before;
        self.set_hash ^= key_of_op(last);
        self.list.unlift(last);
        Some(self.list.next[self.list.at[last].0])
    }
}

/// Searches for an order of `ops` (one key's) the register allows, within `budget`.
pub fn search(ops: &[Op], budget: Budget) -> Verdict {
    let mut s = Search {
        ops,
        list: List::of(ops),
        stack: Vec::new(),
        state: State::ABSENT,
        set_hash: 0,
        seen: FastSet::default(),
        best: None,
        versions: Versions::of(ops),
    };
    let mut entry = s.list.next[HEAD];
    let mut steps = 0u64;
    loop {
        steps += 1;
        if steps > budget.steps || s.seen.len() as u64 > budget.states {
            let depth = s.best.as_ref().map_or(s.stack.len(), |b| b.depth);
            return Verdict::GaveUp {
                states: s.seen.len() as u64,
                steps,
                depth: depth.max(s.stack.len()),
            };
        }
        if entry == s.list.end() {
            return Verdict::Linearizable {
                states: s.seen.len() as u64,
            };
        }
        let e = s.list.entries[entry];
        if !e.is_return {
            entry = match s.try_take(e.op) {
                true => s.list.next[HEAD],
                false => s.list.next[entry],
            };
            continue;
        }
        // Only returns of unknown outcome are left: those operations never took effect.
        if ops[e.op].ret.is_none() {
            return Verdict::Linearizable {
                states: s.seen.len() as u64,
            };
        }
        match s.undo(e.op) {
            Some(next) => entry = next,
            None => {
                let mut best = s.best.take().expect("noted by undo");
                best.states = s.seen.len() as u64;
                return Verdict::NotLinearizable(best);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(value: i64, version: i64) -> State {
        State {
            value: Some(value),
            version,
        }
    }

    /// An operation from `call` to `ret` ms (None: unknown outcome).
    fn op(action: Action, seen: Option<State>, call: u64, ret: Option<u64>) -> Op {
        Op {
            action,
            seen,
            call: (call, call as u32),
            ret: ret.map(|r| (r, r as u32)),
        }
    }

    fn budget() -> Budget {
        Budget::of_states(100_000)
    }

    #[test]
    fn the_register_is_a_znode() {
        let a = State::ABSENT;
        assert_eq!(step(a, Action::Create(5), None), Some(state(5, 0)));
        assert_eq!(step(state(5, 0), Action::Create(6), None), None);
        assert_eq!(step(a, Action::Set(5), None), None);
        assert_eq!(step(state(5, 0), Action::Set(6), None), Some(state(6, 1)));
        let cas = Action::Cas {
            expect: 1,
            value: 7,
        };
        assert_eq!(step(state(6, 1), cas, None), Some(state(7, 2)));
        assert_eq!(step(state(6, 2), cas, None), None);
        assert_eq!(step(a, Action::Read, Some(a)), Some(a));
        assert_eq!(step(state(6, 1), Action::Read, Some(state(5, 0))), None);
        // An acknowledged write that says another version than it left did not happen here.
        assert_eq!(step(state(5, 0), Action::Set(6), Some(state(6, 3))), None);
    }

    #[test]
    fn overlapping_writes_order_as_the_reads_saw_them() {
        let ops = [
            op(Action::Create(1), Some(state(1, 0)), 0, Some(1)),
            op(Action::Set(2), Some(state(2, 2)), 2, Some(10)),
            op(Action::Set(3), Some(state(3, 1)), 3, Some(9)),
            op(Action::Read, Some(state(3, 1)), 4, Some(5)),
            op(Action::Read, Some(state(2, 2)), 11, Some(12)),
        ];
        assert!(matches!(
            search(&ops, budget()),
            Verdict::Linearizable { .. }
        ));
    }

    #[test]
    fn a_stale_read_after_a_completed_write_is_not_linearizable() {
        let ops = [
            op(Action::Create(1), Some(state(1, 0)), 0, Some(1)),
            op(Action::Set(2), Some(state(2, 1)), 2, Some(3)),
            op(Action::Read, Some(state(1, 0)), 4, Some(5)),
        ];
        let Verdict::NotLinearizable(b) = search(&ops, budget()) else {
            panic!("linearizable?")
        };
        assert_eq!((b.depth, b.op, b.state), (2, 2, state(2, 1)));
        assert_eq!(b.tail, vec![0, 1]);
    }

    #[test]
    fn two_cas_from_one_version_cannot_both_succeed() {
        let cas = |value| Action::Cas { expect: 0, value };
        let ops = [
            op(Action::Create(1), Some(state(1, 0)), 0, Some(1)),
            op(cas(2), Some(state(2, 1)), 2, Some(6)),
            op(cas(3), Some(state(3, 1)), 3, Some(5)),
        ];
        assert!(matches!(
            search(&ops, budget()),
            Verdict::NotLinearizable(_)
        ));
    }

    #[test]
    fn an_unknown_write_may_take_effect_late_or_never() {
        let ops = [
            op(Action::Create(1), Some(state(1, 0)), 0, Some(1)),
            // Unknown, seen later: it happened after the first read.
            op(Action::Set(2), None, 2, None),
            op(Action::Read, Some(state(1, 0)), 3, Some(4)),
            op(Action::Read, Some(state(2, 1)), 5, Some(6)),
            // Unknown and never seen: dropped.
            op(Action::Set(9), None, 7, None),
            op(Action::Read, Some(state(2, 1)), 8, Some(9)),
        ];
        assert!(matches!(
            search(&ops, budget()),
            Verdict::Linearizable { .. }
        ));
    }

    #[test]
    fn an_unknown_write_never_leaves_a_version_a_known_write_left() {
        // The unknown set of 9 would have to leave version 1, which the known set of 2 left.
        let ops = [
            op(Action::Create(1), Some(state(1, 0)), 0, Some(1)),
            op(Action::Set(9), None, 2, None),
            op(Action::Set(2), Some(state(2, 1)), 3, Some(4)),
            op(Action::Read, Some(state(9, 1)), 5, Some(6)),
        ];
        assert!(matches!(
            search(&ops, budget()),
            Verdict::NotLinearizable(_)
        ));
    }

    #[test]
    fn a_search_beyond_its_budget_gives_up() {
        // Unknown writes that may each happen or not, and a read no order explains: every
        // order of three of them is tried before the search can say no.
        let mut ops = vec![op(Action::Create(0), Some(state(0, 0)), 0, Some(1))];
        for i in 0..40 {
            ops.push(op(Action::Set(i + 1), None, 2 + i as u64, None));
        }
        ops.push(op(Action::Read, Some(state(99, 3)), 50, Some(51)));
        let tight = Budget::of_states(1_000);
        assert!(matches!(search(&ops, tight), Verdict::GaveUp { .. }));
        assert!(matches!(
            search(&ops, Budget::of_states(10_000_000)),
            Verdict::NotLinearizable(_)
        ));
    }
}

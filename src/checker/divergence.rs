//! What two diverging final logs hold past the entry where they part, for durability's
//! explanation: each side's own entries (their epochs and zxids, how many were acknowledged,
//! which other nodes hold them), and, when it is one, the shape's name.
//!
//! The shape named: one replica kept writes of an old epoch that no client had acknowledged
//! and nobody else has, and lacks acknowledged writes of the next epoch that the others hold.
//! That is what a learner is left with when its leader synced it with a DIFF where a TRUNC was
//! due (its uncommitted tail was never cut, the next epoch's first writes never sent): seen in
//! ZooKeeper 3.8.0 (ZOOKEEPER-2846, docs/zookeeper.md) and possible in any Zab.

use super::fxhash::FastMap;
use super::kind::Kind;

/// A final log by node name.
pub type NamedLog<'a> = (&'a str, &'a [(u64, String)]);

/// One side's entries past the parting point that the other side lacks.
struct Own<'a> {
    node: &'a str,
    entries: Vec<&'a (u64, String)>,
    acknowledged: usize,
    /// The other nodes whose final logs hold the first of them (the first stands for the run).
    also_held_by: Vec<&'a str>,
}

fn epoch(zxid: u64) -> u64 {
    zxid >> 32
}

fn own<'a>(
    side: NamedLog<'a>,
    other: NamedLog<'a>,
    from: usize,
    logs: &[NamedLog<'a>],
    acknowledged: &dyn Fn(&str) -> bool,
) -> Own<'a> {
    let theirs: FastMap<&str, ()> = other.1.iter().map(|(_, v)| (v.as_str(), ())).collect();
    let entries: Vec<&(u64, String)> = side.1[from.min(side.1.len())..]
        .iter()
        .filter(|(_, v)| !theirs.contains_key(v.as_str()))
        .collect();
    let acked = entries.iter().filter(|(_, v)| acknowledged(v)).count();
    let also_held_by = entries
        .first()
        .map(|(_, v)| {
            logs.iter()
                .filter(|(n, l)| *n != side.0 && l.iter().any(|(_, w)| w == v))
                .map(|(n, _)| *n)
                .collect()
        })
        .unwrap_or_default();
    Own {
        node: side.0,
        entries,
        acknowledged: acked,
        also_held_by,
    }
}

/// "2 entries of epoch 1 (zxids 0x10000002c-0x10000002d), none acknowledged".
fn entries_text(o: &Own) -> String {
    let mut epochs: Vec<u64> = o.entries.iter().map(|(z, _)| epoch(*z)).collect();
    epochs.dedup();
    let epochs = epochs
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let (first, last) = (o.entries[0].0, o.entries[o.entries.len() - 1].0);
    let zxids = if first == last {
        format!("zxid {first:#x}")
    } else {
        format!("zxids {first:#x}-{last:#x}")
    };
    let acked = match o.acknowledged {
        0 => "none acknowledged".to_string(),
        n if n == o.entries.len() => "all acknowledged".to_string(),
        n => format!("{n} acknowledged"),
    };
    let epoch_word = if epochs.contains(',') {
        "epochs"
    } else {
        "epoch"
    };
    format!(
        "{} entr{} of {epoch_word} {epochs} ({zxids}), {acked}",
        o.entries.len(),
        if o.entries.len() == 1 { "y" } else { "ies" }
    )
}

fn held_text(o: &Own) -> String {
    match o.also_held_by.as_slice() {
        [] => format!("{} alone holds", o.node),
        others => format!("{}, {} hold", o.node, others.join(", ")),
    }
}

/// Whether `part` appears in `whole` in the same order (one pass).
fn is_subsequence(part: &[(u64, String)], whole: &[(u64, String)]) -> bool {
    let mut rest = whole.iter();
    part.iter().all(|e| rest.any(|w| w == e))
}

/// What `a` and `b` hold past entry `from`, where they part, in a sentence or two, and the
/// divergence's kind (`Fork` unless it is a hole or a stale tail); `logs` are every readable
/// final log, `acknowledged` says whether a value's write was acknowledged.
pub fn describe(
    a: NamedLog,
    b: NamedLog,
    from: usize,
    logs: &[NamedLog],
    acknowledged: &dyn Fn(&str) -> bool,
) -> (String, Kind) {
    let (oa, ob) = (
        own(a, b, from, logs, acknowledged),
        own(b, a, from, logs, acknowledged),
    );
    let mut text = Vec::new();
    for o in [&oa, &ob] {
        if !o.entries.is_empty() {
            text.push(format!("{} {}", held_text(o), entries_text(o)));
        }
    }
    if text.is_empty() {
        return (String::new(), Kind::Fork);
    }
    let mut kind = Kind::Fork;
    let mut out = format!("Past it, {}.", text.join("; "));
    // One side has nothing of its own and its entries come in the other's order: it skipped
    // entries the other holds (a reordering is no hole).
    for ((short, s_log), (long, l_log)) in [((&oa, a.1), (&ob, b.1)), ((&ob, b.1), (&oa, a.1))] {
        let from = from.min(s_log.len());
        if short.entries.is_empty()
            && !long.entries.is_empty()
            && is_subsequence(&s_log[from..], l_log)
        {
            out.push_str(&format!(
                " {} holds nothing {} lacks: a hole in its log, not a fork.",
                short.node, long.node
            ));
            kind = Kind::Hole;
        }
    }
    // The stale side: its own entries unacknowledged and all of an older epoch than the
    // acknowledged ones it lacks.
    for (stale, other) in [(&oa, &ob), (&ob, &oa)] {
        let newest_stale = stale.entries.iter().map(|(z, _)| epoch(*z)).max();
        let oldest_missed = other
            .entries
            .iter()
            .filter(|(_, v)| acknowledged(v))
            .map(|(z, _)| epoch(*z))
            .min();
        if let (Some(s), Some(m)) = (newest_stale, oldest_missed) {
            if stale.acknowledged == 0 && s < m && stale.also_held_by.is_empty() {
                out.push_str(&format!(
                    " {} kept uncommitted writes of an old epoch and missed acknowledged ones of \
                     a newer one: the mark of a sync that sent it a DIFF where a TRUNC was due.",
                    stale.node
                ));
                kind = Kind::StaleTail;
                break;
            }
        }
    }
    (out, kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(entries: &[(u64, &str)]) -> Vec<(u64, String)> {
        entries.iter().map(|(z, v)| (*z, v.to_string())).collect()
    }

    #[test]
    fn a_stale_tail_and_a_missed_epoch_are_named() {
        let common = [(0x1_0000_0001, "1"), (0x1_0000_0002, "2")];
        let mut stale = log(&common);
        stale.extend(log(&[(0x1_0000_0003, "3"), (0x1_0000_0004, "4")]));
        stale.extend(log(&[(0x2_0000_0009, "9")]));
        let mut good = log(&common);
        good.extend(log(&[
            (0x2_0000_0001, "5"),
            (0x2_0000_0002, "6"),
            (0x2_0000_0009, "9"),
        ]));
        let logs: Vec<NamedLog> = vec![("n4", &stale), ("n1", &good), ("n2", &good)];
        let acked = |v: &str| ["5", "6", "9"].contains(&v);
        let (text, kind) = describe(("n4", &stale), ("n1", &good), 2, &logs, &acked);
        assert_eq!(kind, Kind::StaleTail);
        assert!(
            text.contains("n4 alone holds 2 entries of epoch 1 (zxids 0x100000003-0x100000004), none acknowledged"),
            "{text}"
        );
        assert!(
            text.contains("n1, n2 hold 2 entries of epoch 2 (zxids 0x200000001-0x200000002), all acknowledged"),
            "{text}"
        );
        assert!(text.contains("n4 kept uncommitted writes"), "{text}");
        // The same logs the other way round name the same replica.
        let (text, kind) = describe(("n1", &good), ("n4", &stale), 2, &logs, &acked);
        assert!(text.contains("n4 kept uncommitted writes"), "{text}");
        assert_eq!(kind, Kind::StaleTail);
    }

    #[test]
    fn a_plain_fork_is_described_but_not_named() {
        // Both sides acknowledged writes of the same epoch: two leaders, not a stale tail.
        let a = log(&[(0x1_0000_0001, "1"), (0x2_0000_0001, "a")]);
        let b = log(&[(0x1_0000_0001, "1"), (0x2_0000_0001, "b")]);
        let logs: Vec<NamedLog> = vec![("n1", &a), ("n2", &b)];
        let acked = |_: &str| true;
        let (text, kind) = describe(("n1", &a), ("n2", &b), 1, &logs, &acked);
        assert_eq!(kind, Kind::Fork);
        assert!(
            text.contains("n1 alone holds 1 entry of epoch 2 (zxid 0x200000001), all acknowledged")
        );
        assert!(!text.contains("TRUNC"), "{text}");
        assert!(!text.contains("hole"), "{text}");
    }

    #[test]
    fn a_hole_is_told_from_a_fork() {
        let full = log(&[
            (0x3_0000_0001, "1"),
            (0x3_0000_0002, "2"),
            (0x3_0000_0003, "3"),
        ]);
        let holed = log(&[(0x3_0000_0001, "1"), (0x3_0000_0003, "3")]);
        let logs: Vec<NamedLog> = vec![("n3", &holed), ("n5", &full)];
        let (text, kind) = describe(("n3", &holed), ("n5", &full), 1, &logs, &|_| true);
        assert_eq!(kind, Kind::Hole);
        assert!(
            text.contains("n5 alone holds 1 entry of epoch 3 (zxid 0x300000002), all acknowledged"),
            "{text}"
        );
        assert!(
            text.contains("n3 holds nothing n5 lacks: a hole in its log"),
            "{text}"
        );
    }
}

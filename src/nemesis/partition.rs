//! Partition shapes as grudges: for each node, the nodes whose traffic it drops. A grudge is what
//! the iptables rules implement (one DROP per source address, in the receiving node's namespace),
//! so a one-way cut is simply an asymmetric grudge.

use super::schedule::{Grudge, PartitionShape};
use super::targets::Ensemble;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;

/// The grudge for `shape` over `ens` (nodes sorted by sid). `targets` are the resolved targets
/// of the fault (the node to isolate for isolate-* and one-way); `pick` seeds random shapes.
pub fn grudge(shape: PartitionShape, ens: Ensemble, targets: &[String], pick: u64) -> Grudge {
    let nodes = ens.nodes;
    let mut g = Grudge::new();
    let first_target = targets.first().cloned().unwrap_or_else(|| nodes[0].clone());
    match shape {
        PartitionShape::IsolateLeader | PartitionShape::IsolateOne => {
            let rest: Vec<String> = nodes
                .iter()
                .filter(|n| **n != first_target)
                .cloned()
                .collect();
            cut(&mut g, &[first_target], &rest);
        }
        PartitionShape::Halves => {
            let (a, b) = nodes.split_at(nodes.len() / 2);
            cut(&mut g, a, b);
        }
        PartitionShape::RandomHalves => {
            let shuffled = shuffled(nodes, pick);
            let (a, b) = shuffled.split_at(nodes.len() / 2);
            cut(&mut g, a, b);
        }
        PartitionShape::MajoritiesRing => {
            // In a ring, each node keeps its nearest neighbours on both sides, enough that it sees
            // a majority (itself included); everyone else is dropped. With 5 nodes each sees 3 and
            // no two see the same 3.
            let ring = shuffled(nodes, pick);
            let n = ring.len();
            let reach = (n / 2).div_ceil(2);
            for (i, node) in ring.iter().enumerate() {
                for (j, other) in ring.iter().enumerate() {
                    let d = (i + n - j) % n;
                    let distance = d.min(n - d);
                    if i != j && distance > reach {
                        g.entry(node.clone()).or_default().insert(other.clone());
                    }
                }
            }
        }
        PartitionShape::Bridge => {
            // Two halves that see each other only through one node in the middle.
            let shuffled = shuffled(nodes, pick);
            let half = nodes.len() / 2;
            let (a, rest) = shuffled.split_at(
                half.saturating_sub(if nodes.len() % 2 == 0 { 1 } else { 0 })
                    .max(1),
            );
            let b = &rest[1..];
            cut(&mut g, a, b);
        }
        // Explicit groups come with the fault: see `groups_grudge`.
        PartitionShape::Groups => {}
        PartitionShape::LeaderMinority => {
            // The leader plus seeded followers fill the largest minority of voters; the rest
            // are the majority. Commit-quorum bugs need the leader to still hear *some*
            // followers; observer-ack bugs need it to hear the observers.
            let voters = ens.voters();
            let followers = shuffled(
                &voters
                    .iter()
                    .filter(|n| **n != first_target)
                    .cloned()
                    .collect::<Vec<_>>(),
                pick,
            );
            let minority = voters.len() - crate::api::quorum(voters.len());
            let mut side = vec![first_target];
            side.extend(followers.iter().take(minority.saturating_sub(1)).cloned());
            side.extend(ens.observers());
            let rest: Vec<String> = nodes
                .iter()
                .filter(|n| !side.contains(n))
                .cloned()
                .collect();
            cut(&mut g, &side, &rest);
        }
        PartitionShape::IsolateObservers => {
            cut(&mut g, &ens.observers(), &ens.voters());
        }
        PartitionShape::OneWay => {
            for other in nodes.iter().filter(|n| **n != first_target) {
                g.entry(other.clone())
                    .or_default()
                    .insert(first_target.clone());
            }
        }
    }
    g
}

/// The grudge of explicit `groups`: each node drops everyone outside its own group; a node in
/// no group drops (and is dropped by) everyone.
pub fn groups_grudge(nodes: &[String], groups: &[Vec<String>]) -> Grudge {
    let group_of = |n: &String| groups.iter().position(|g| g.contains(n));
    let mut g = Grudge::new();
    for a in nodes {
        for b in nodes {
            if a != b && (group_of(a).is_none() || group_of(a) != group_of(b)) {
                g.entry(a.clone()).or_default().insert(b.clone());
            }
        }
    }
    g
}

/// Every node of `a` drops `b`'s traffic and the other way round.
fn cut(g: &mut Grudge, a: &[String], b: &[String]) {
    for x in a {
        for y in b {
            g.entry(x.clone()).or_default().insert(y.clone());
            g.entry(y.clone()).or_default().insert(x.clone());
        }
    }
}

fn shuffled(nodes: &[String], pick: u64) -> Vec<String> {
    let mut v = nodes.to_vec();
    v.shuffle(&mut ChaCha8Rng::seed_from_u64(pick));
    v
}

/// The groups of nodes that can all reach each other both ways (for the history and reports).
pub fn components(nodes: &[String], g: &Grudge) -> Vec<Vec<String>> {
    let drops = |a: &String, b: &String| g.get(a).is_some_and(|s| s.contains(b));
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for start in nodes {
        if seen.contains(start) {
            continue;
        }
        let mut group = vec![start.clone()];
        seen.insert(start.clone());
        let mut i = 0;
        while i < group.len() {
            let x = group[i].clone();
            for y in nodes {
                if !seen.contains(y) && !drops(&x, y) && !drops(y, &x) {
                    seen.insert(y.clone());
                    group.push(y.clone());
                }
            }
            i += 1;
        }
        group.sort_by_key(|n| crate::history::sid_of(n));
        out.push(group);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("n{i}")).collect()
    }

    fn sees(g: &Grudge, a: &str, b: &str) -> bool {
        !g.get(a).is_some_and(|s| s.contains(b)) && !g.get(b).is_some_and(|s| s.contains(a))
    }

    #[test]
    fn isolate_cuts_one_node_from_all_both_ways() {
        let g = grudge(
            PartitionShape::IsolateOne,
            Ensemble::voting(&nodes(5)),
            &["n3".into()],
            0,
        );
        assert_eq!(g["n3"].len(), 4);
        for other in ["n1", "n2", "n4", "n5"] {
            assert!(g[other].contains("n3") && g[other].len() == 1);
        }
        assert_eq!(
            components(&nodes(5), &g),
            vec![
                nodes(5)
                    .into_iter()
                    .filter(|n| n != "n3")
                    .collect::<Vec<_>>(),
                vec!["n3".to_string()]
            ]
        );
    }

    #[test]
    fn halves_leave_a_minority_and_a_majority() {
        let g = grudge(PartitionShape::Halves, Ensemble::voting(&nodes(5)), &[], 0);
        let c = components(&nodes(5), &g);
        assert_eq!(
            c,
            vec![
                vec!["n1".to_string(), "n2".into()],
                vec!["n3".into(), "n4".into(), "n5".into()]
            ]
        );
        let g4 = grudge(PartitionShape::Halves, Ensemble::voting(&nodes(4)), &[], 0);
        assert_eq!(
            components(&nodes(4), &g4)
                .iter()
                .map(Vec::len)
                .collect::<Vec<_>>(),
            vec![2, 2]
        );
    }

    #[test]
    fn random_halves_depend_on_the_pick() {
        let sizes = |p| {
            let mut s: Vec<usize> = components(
                &nodes(5),
                &grudge(
                    PartitionShape::RandomHalves,
                    Ensemble::voting(&nodes(5)),
                    &[],
                    p,
                ),
            )
            .iter()
            .map(Vec::len)
            .collect();
            s.sort();
            s
        };
        assert_eq!(sizes(1), vec![2, 3]);
        let shapes: BTreeSet<_> = (0..20)
            .map(|p| {
                components(
                    &nodes(5),
                    &grudge(
                        PartitionShape::RandomHalves,
                        Ensemble::voting(&nodes(5)),
                        &[],
                        p,
                    ),
                )
            })
            .collect();
        assert!(shapes.len() > 1);
    }

    #[test]
    fn majorities_ring_gives_every_node_a_distinct_majority() {
        let all = nodes(5);
        let g = grudge(
            PartitionShape::MajoritiesRing,
            Ensemble::voting(&all),
            &[],
            9,
        );
        let mut views = BTreeSet::new();
        for a in &all {
            let view: BTreeSet<&String> =
                all.iter().filter(|b| *b == a || sees(&g, a, b)).collect();
            assert_eq!(view.len(), 3, "{a} sees {view:?}");
            views.insert(view);
        }
        assert_eq!(views.len(), 5);
    }

    #[test]
    fn bridge_joins_two_halves_through_one_node() {
        for n in [3, 4, 5, 7] {
            let all = nodes(n);
            let g = grudge(PartitionShape::Bridge, Ensemble::voting(&all), &[], 3);
            let bridges: Vec<&String> = all
                .iter()
                .filter(|a| all.iter().all(|b| sees(&g, a, b)))
                .collect();
            assert_eq!(bridges.len(), 1, "n={n}: {g:?}");
            assert!(
                all.iter().any(|a| all.iter().any(|b| !sees(&g, a, b))),
                "n={n}: nothing is cut"
            );
        }
    }

    #[test]
    fn explicit_groups_cut_between_groups_and_isolate_the_rest() {
        let groups = vec![
            vec!["n1".to_string(), "n2".into()],
            vec!["n3".into(), "n4".into()],
        ];
        let g = groups_grudge(&nodes(5), &groups);
        let c = components(&nodes(5), &g);
        assert_eq!(
            c,
            vec![
                vec!["n1".to_string(), "n2".into()],
                vec!["n3".into(), "n4".into()],
                vec!["n5".into()]
            ]
        );
    }

    #[test]
    fn leader_minority_keeps_followers_with_the_leader() {
        for (n, with_leader) in [(3, 1), (5, 2), (7, 3)] {
            let all = nodes(n);
            let g = grudge(
                PartitionShape::LeaderMinority,
                Ensemble::voting(&all),
                &["n2".into()],
                4,
            );
            let c = components(&all, &g);
            assert_eq!(c.len(), 2, "n={n}: {c:?}");
            let leader_side = c.iter().find(|s| s.contains(&"n2".to_string())).unwrap();
            assert_eq!(leader_side.len(), with_leader, "n={n}: {c:?}");
        }
        let sides: BTreeSet<_> = (0..20)
            .map(|p| {
                components(
                    &nodes(5),
                    &grudge(
                        PartitionShape::LeaderMinority,
                        Ensemble::voting(&nodes(5)),
                        &["n1".into()],
                        p,
                    ),
                )
            })
            .collect();
        assert!(sides.len() > 1, "the followers kept are seeded");
    }

    #[test]
    fn one_way_drops_only_traffic_from_the_target() {
        let g = grudge(
            PartitionShape::OneWay,
            Ensemble::voting(&nodes(3)),
            &["n1".into()],
            0,
        );
        assert!(!g.contains_key("n1"), "n1 still hears everyone");
        assert!(g["n2"].contains("n1") && g["n3"].contains("n1"));
    }

    #[test]
    fn leader_minority_takes_the_observers_and_isolate_observers_cuts_them_off() {
        let all = nodes(7);
        let observers = vec!["n6".to_string(), "n7".to_string()];
        let ens = Ensemble {
            nodes: &all,
            observers: &observers,
        };
        for p in 0..10 {
            let g = grudge(PartitionShape::LeaderMinority, ens, &["n3".into()], p);
            // n3, one more voter and both observers against the other three voters.
            let side: Vec<&String> = all.iter().filter(|n| !g[*n].contains("n6")).collect();
            assert_eq!(side.len(), 4, "{g:?}");
            assert!(side.contains(&&"n3".to_string()) && side.contains(&&"n7".to_string()));
        }
        let g = grudge(PartitionShape::IsolateObservers, ens, &[], 0);
        assert!(g["n6"].contains("n1") && !g["n6"].contains("n7"));
        assert!(g["n5"].contains("n7") && !g["n5"].contains("n4"));
        assert_eq!(
            PartitionShape::parse("isolate-observers"),
            Some(PartitionShape::IsolateObservers)
        );
    }
}

//! Resolving a fault's target (leader, random, minority, ...) to node names when the fault starts.
//! Random choices come from the planned fault's `pick`, so they replay with the seed; the leader
//! comes from the observers' latest reads and is recorded with the fault.

use super::schedule::TargetSpec;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The nodes a fault hits, and a note when the target had to be approximated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub nodes: Vec<String>,
    pub note: Option<String>,
}

/// `size` nodes of `from` drawn with `pick` (same pick, same draw), sorted by sid.
pub fn drawn(mut from: Vec<String>, size: usize, pick: u64) -> Resolved {
    from.shuffle(&mut ChaCha8Rng::seed_from_u64(pick));
    from.truncate(size);
    plain(from)
}

/// `v` sorted by sid, as drawn (no note).
fn plain(mut v: Vec<String>) -> Resolved {
    v.sort_by_key(|s| crate::history::sid_of(s));
    Resolved {
        nodes: v,
        note: None,
    }
}

/// Resolves `spec` over `nodes` (sorted by sid), given the leader the observers see now.
pub fn resolve(spec: &TargetSpec, nodes: &[String], leader: Option<&str>, pick: u64) -> Resolved {
    let n = nodes.len();
    // Every node but the observed leader; None when no leader in `nodes` is seen.
    let followers: Option<Vec<String>> = leader
        .filter(|l| nodes.iter().any(|x| x == l))
        .map(|l| nodes.iter().filter(|x| *x != l).cloned().collect());
    match spec {
        TargetSpec::Leader => match leader {
            Some(l) if nodes.iter().any(|x| x == l) => plain(vec![l.to_string()]),
            _ => Resolved {
                nodes: vec![nodes[(pick % n as u64) as usize].clone()],
                note: Some("no leader observed: hit a random node instead".into()),
            },
        },
        TargetSpec::Random => plain(vec![nodes[(pick % n as u64) as usize].clone()]),
        // The runner puts the observed node in place of `trigger`; left here, it fired no read.
        TargetSpec::Trigger => Resolved {
            nodes: vec![nodes[(pick % n as u64) as usize].clone()],
            note: Some("no trigger observed: hit a random node instead".into()),
        },
        // The runner puts the composition's nodes in place of `main` / `others`; left here, no
        // main fault hit anything.
        TargetSpec::Main | TargetSpec::Others => Resolved {
            nodes: vec![nodes[(pick % n as u64) as usize].clone()],
            note: Some("no composed main fault's nodes: hit a random node instead".into()),
        },
        TargetSpec::Follower => match &followers {
            Some(f) if !f.is_empty() => plain(vec![f[(pick % f.len() as u64) as usize].clone()]),
            _ => Resolved {
                nodes: vec![nodes[(pick % n as u64) as usize].clone()],
                note: Some("no leader observed: hit a random node instead".into()),
            },
        },
        TargetSpec::Minority => drawn(nodes.to_vec(), n - crate::api::quorum(n), pick),
        TargetSpec::Majority => drawn(nodes.to_vec(), crate::api::quorum(n), pick),
        TargetSpec::All => plain(nodes.to_vec()),
        TargetSpec::Followers | TargetSpec::FollowersLow | TargetSpec::FollowersHigh => {
            let (mut followers, note) = match followers {
                Some(f) => (f, None),
                None => (
                    nodes.to_vec(),
                    Some("no leader observed: counted every node as a follower".to_string()),
                ),
            };
            followers.sort_by_key(|s| crate::history::sid_of(s));
            let half = followers.len() / 2;
            let nodes = match spec {
                TargetSpec::FollowersLow => followers[..half].to_vec(),
                TargetSpec::FollowersHigh => followers[half..].to_vec(),
                _ => followers,
            };
            Resolved { nodes, note }
        }
        TargetSpec::Highest => plain(
            nodes
                .iter()
                .max_by_key(|x| crate::history::sid_of(x))
                .cloned()
                .into_iter()
                .collect(),
        ),
        TargetSpec::Nodes(list) => {
            plain(list.iter().filter(|x| nodes.contains(x)).cloned().collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("n{i}")).collect()
    }

    #[test]
    fn roles_and_sizes() {
        let all = nodes(5);
        assert_eq!(
            resolve(&TargetSpec::Leader, &all, Some("n4"), 0).nodes,
            vec!["n4"]
        );
        let fallback = resolve(&TargetSpec::Leader, &all, None, 7);
        assert_eq!(fallback.nodes.len(), 1);
        assert!(fallback.note.is_some());
        assert_eq!(resolve(&TargetSpec::Minority, &all, None, 1).nodes.len(), 2);
        assert_eq!(resolve(&TargetSpec::Majority, &all, None, 1).nodes.len(), 3);
        assert_eq!(
            resolve(&TargetSpec::Minority, &nodes(3), None, 1)
                .nodes
                .len(),
            1
        );
        assert_eq!(resolve(&TargetSpec::All, &all, None, 1).nodes, all);
        assert_eq!(
            resolve(&TargetSpec::Highest, &all, None, 1).nodes,
            vec!["n5"]
        );
        assert_eq!(
            resolve(&TargetSpec::Followers, &all, Some("n2"), 1).nodes,
            vec!["n1", "n3", "n4", "n5"]
        );
        assert_eq!(
            resolve(&TargetSpec::FollowersLow, &all, Some("n2"), 1).nodes,
            vec!["n1", "n3"]
        );
        assert_eq!(
            resolve(&TargetSpec::FollowersHigh, &all, Some("n2"), 1).nodes,
            vec!["n4", "n5"]
        );
        for pick in 0..20 {
            let f = resolve(&TargetSpec::Follower, &all, Some("n3"), pick);
            assert_eq!(f.nodes.len(), 1);
            assert_ne!(f.nodes[0], "n3", "a follower is never the leader");
        }
        assert!(resolve(&TargetSpec::Follower, &all, None, 0).note.is_some());
        let named = TargetSpec::Nodes(vec!["n2".into(), "n1".into()]);
        assert_eq!(resolve(&named, &all, None, 1).nodes, vec!["n1", "n2"]);
    }

    #[test]
    fn random_choices_follow_the_pick() {
        let all = nodes(5);
        let a = resolve(&TargetSpec::Minority, &all, None, 11);
        assert_eq!(a, resolve(&TargetSpec::Minority, &all, None, 11));
        let distinct: std::collections::BTreeSet<_> = (0..30)
            .map(|p| resolve(&TargetSpec::Random, &all, None, p).nodes)
            .collect();
        assert!(distinct.len() >= 4);
    }
}

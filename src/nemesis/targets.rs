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

/// The servers a fault can hit, and which of them only observe: "minority", "majority",
/// "followers" and "highest" are of the voters (a quorum counts voters only), "random" and
/// "all" of every server.
#[derive(Debug, Clone, Copy)]
pub struct Ensemble<'a> {
    /// Every node, sorted by sid.
    pub nodes: &'a [String],
    pub observers: &'a [String],
}

impl<'a> Ensemble<'a> {
    /// An ensemble of voters only.
    pub fn voting(nodes: &'a [String]) -> Self {
        Ensemble {
            nodes,
            observers: &[],
        }
    }

    pub fn is_observer(&self, node: &str) -> bool {
        self.observers.iter().any(|o| o == node)
    }

    /// The voters, sorted by sid.
    pub fn voters(&self) -> Vec<String> {
        let voting = |n: &&String| !self.is_observer(n);
        self.nodes.iter().filter(voting).cloned().collect()
    }

    /// The observers among the nodes, sorted by sid.
    pub fn observers(&self) -> Vec<String> {
        let observing = |n: &&String| self.is_observer(n);
        self.nodes.iter().filter(observing).cloned().collect()
    }
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

/// Resolves `spec` over `ens` (nodes sorted by sid), given the leader the status pollers see
/// now.
pub fn resolve(spec: &TargetSpec, ens: Ensemble, leader: Option<&str>, pick: u64) -> Resolved {
    let nodes = ens.nodes;
    let n = nodes.len();
    let voters = ens.voters();
    let v = voters.len();
    // Every voter but the observed leader; None when no leader in `nodes` is seen.
    let followers: Option<Vec<String>> = leader
        .filter(|l| nodes.iter().any(|x| x == l))
        .map(|l| voters.iter().filter(|x| *x != l).cloned().collect());
    let random = |why: &str| Resolved {
        nodes: vec![nodes[(pick % n as u64) as usize].clone()],
        note: Some(format!("{why}: hit a random node instead")),
    };
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
        TargetSpec::Minority => drawn(voters, v - crate::api::quorum(v), pick),
        TargetSpec::Majority => drawn(voters, crate::api::quorum(v), pick),
        TargetSpec::Observer | TargetSpec::Observers if ens.observers().is_empty() => {
            random("no observers in the ensemble")
        }
        TargetSpec::Observer => drawn(ens.observers(), 1, pick),
        TargetSpec::Observers => plain(ens.observers()),
        TargetSpec::Voter => drawn(voters, 1, pick),
        TargetSpec::All => plain(nodes.to_vec()),
        TargetSpec::Followers | TargetSpec::FollowersLow | TargetSpec::FollowersHigh => {
            let (mut followers, note) = match followers {
                Some(f) => (f, None),
                None => (
                    voters.clone(),
                    Some("no leader observed: counted every voter as a follower".to_string()),
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
            voters
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
            resolve(&TargetSpec::Leader, Ensemble::voting(&all), Some("n4"), 0).nodes,
            vec!["n4"]
        );
        let fallback = resolve(&TargetSpec::Leader, Ensemble::voting(&all), None, 7);
        assert_eq!(fallback.nodes.len(), 1);
        assert!(fallback.note.is_some());
        assert_eq!(
            resolve(&TargetSpec::Minority, Ensemble::voting(&all), None, 1)
                .nodes
                .len(),
            2
        );
        assert_eq!(
            resolve(&TargetSpec::Majority, Ensemble::voting(&all), None, 1)
                .nodes
                .len(),
            3
        );
        assert_eq!(
            resolve(&TargetSpec::Minority, Ensemble::voting(&nodes(3)), None, 1)
                .nodes
                .len(),
            1
        );
        assert_eq!(
            resolve(&TargetSpec::All, Ensemble::voting(&all), None, 1).nodes,
            all
        );
        assert_eq!(
            resolve(&TargetSpec::Highest, Ensemble::voting(&all), None, 1).nodes,
            vec!["n5"]
        );
        assert_eq!(
            resolve(
                &TargetSpec::Followers,
                Ensemble::voting(&all),
                Some("n2"),
                1
            )
            .nodes,
            vec!["n1", "n3", "n4", "n5"]
        );
        assert_eq!(
            resolve(
                &TargetSpec::FollowersLow,
                Ensemble::voting(&all),
                Some("n2"),
                1
            )
            .nodes,
            vec!["n1", "n3"]
        );
        assert_eq!(
            resolve(
                &TargetSpec::FollowersHigh,
                Ensemble::voting(&all),
                Some("n2"),
                1
            )
            .nodes,
            vec!["n4", "n5"]
        );
        for pick in 0..20 {
            let f = resolve(
                &TargetSpec::Follower,
                Ensemble::voting(&all),
                Some("n3"),
                pick,
            );
            assert_eq!(f.nodes.len(), 1);
            assert_ne!(f.nodes[0], "n3", "a follower is never the leader");
        }
        assert!(
            resolve(&TargetSpec::Follower, Ensemble::voting(&all), None, 0)
                .note
                .is_some()
        );
        let named = TargetSpec::Nodes(vec!["n2".into(), "n1".into()]);
        assert_eq!(
            resolve(&named, Ensemble::voting(&all), None, 1).nodes,
            vec!["n1", "n2"]
        );
    }

    #[test]
    fn random_choices_follow_the_pick() {
        let all = nodes(5);
        let a = resolve(&TargetSpec::Minority, Ensemble::voting(&all), None, 11);
        assert_eq!(
            a,
            resolve(&TargetSpec::Minority, Ensemble::voting(&all), None, 11)
        );
        let distinct: std::collections::BTreeSet<_> = (0..30)
            .map(|p| resolve(&TargetSpec::Random, Ensemble::voting(&all), None, p).nodes)
            .collect();
        assert!(distinct.len() >= 4);
    }

    #[test]
    fn minorities_and_majorities_are_of_voters_and_observers_are_targets() {
        let all = nodes(7);
        let observers = vec!["n6".to_string(), "n7".to_string()];
        let ens = Ensemble {
            nodes: &all,
            observers: &observers,
        };
        for pick in 0..20 {
            let minority = resolve(&TargetSpec::Minority, ens, Some("n1"), pick).nodes;
            assert_eq!(minority.len(), 2, "two of five voters");
            assert!(minority.iter().all(|n| !observers.contains(n)));
            assert_eq!(
                resolve(&TargetSpec::Majority, ens, None, pick).nodes.len(),
                3
            );
            let one = resolve(&TargetSpec::Observer, ens, None, pick).nodes;
            assert!(one.len() == 1 && observers.contains(&one[0]));
            let voter = resolve(&TargetSpec::Voter, ens, None, pick).nodes;
            assert!(voter.len() == 1 && !observers.contains(&voter[0]));
            let followers = resolve(&TargetSpec::Followers, ens, Some("n5"), pick).nodes;
            assert_eq!(followers, vec!["n1", "n2", "n3", "n4"]);
        }
        assert_eq!(
            resolve(&TargetSpec::Observers, ens, None, 0).nodes,
            observers
        );
        assert_eq!(
            resolve(&TargetSpec::Highest, ens, None, 0).nodes,
            vec!["n5"]
        );
        let none = resolve(&TargetSpec::Observers, Ensemble::voting(&all), None, 3);
        assert!(none.note.unwrap().contains("no observers"));
        assert_eq!(TargetSpec::parse("observers"), Some(TargetSpec::Observers));
    }
}

//! Delta debugging (Zeller's ddmin) as a state machine with no I/O: it proposes a batch of
//! candidate subsets, the caller replays them (in parallel, k times each) and says which one
//! still failed, if any. One failing candidate is enough to go on, so a batch can stop at the
//! first failure it sees.
//!
//! With `n` chunks of the current failing set: if a chunk fails, it becomes the set (n = 2);
//! else if a complement fails, it becomes the set (n - 1 chunks); else the chunks are halved
//! (n doubles) until they are single items. The result is 1-minimal: removing any one item
//! makes it pass (as far as the replays could tell).

/// The search over the items (indices) of a failing sequence.
#[derive(Debug, Clone)]
pub struct Ddmin {
    current: Vec<usize>,
    n: usize,
    done: bool,
    /// The last batch proposed, and how many of it are chunks (the rest complements).
    batch: Vec<Vec<usize>>,
    chunks: usize,
}

impl Ddmin {
    /// Starts from `items`, a sequence known to fail.
    pub fn new(items: Vec<usize>) -> Self {
        let done = items.len() < 2;
        Ddmin {
            current: items,
            n: 2,
            done,
            batch: Vec::new(),
            chunks: 0,
        }
    }

    /// The smallest failing sequence found so far.
    pub fn current(&self) -> &[usize] {
        &self.current
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The next batch: the chunks, then (with more than two chunks) their complements, in
    /// that order of preference. Empty when done.
    pub fn batch(&mut self) -> Vec<Vec<usize>> {
        if self.done {
            return Vec::new();
        }
        let len = self.current.len();
        let n = self.n.min(len);
        let chunks: Vec<Vec<usize>> = (0..n)
            .map(|i| self.current[i * len / n..(i + 1) * len / n].to_vec())
            .collect();
        let mut batch = chunks.clone();
        if n > 2 {
            for c in &chunks {
                batch.push(
                    self.current
                        .iter()
                        .filter(|x| !c.contains(x))
                        .copied()
                        .collect(),
                );
            }
        }
        self.chunks = chunks.len();
        self.batch = batch.clone();
        batch
    }

    /// The outcome of the last batch: the index (in it) of a candidate that failed, or None.
    pub fn failed(&mut self, which: Option<usize>) {
        let len = self.current.len();
        match which {
            Some(i) if i < self.chunks => {
                self.current = self.batch[i].clone();
                self.n = 2;
            }
            Some(i) => {
                self.current = self.batch[i].clone();
                self.n = (self.n - 1).max(2);
            }
            None if self.n >= len => self.done = true,
            None => self.n = (self.n * 2).min(len),
        }
        if self.current.len() < 2 {
            self.done = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs ddmin against an oracle; returns the result and how many candidates were tried.
    fn run(items: usize, fails: impl Fn(&[usize]) -> bool) -> (Vec<usize>, usize) {
        let mut d = Ddmin::new((0..items).collect());
        let mut tried = 0;
        while !d.is_done() {
            let batch = d.batch();
            tried += batch.len();
            let which = batch.iter().position(|c| fails(c));
            d.failed(which);
        }
        (d.current().to_vec(), tried)
    }

    #[test]
    fn finds_the_two_faults_that_matter() {
        let (min, tried) = run(16, |c| c.contains(&3) && c.contains(&11));
        assert_eq!(min, vec![3, 11]);
        assert!(tried < 60, "{tried} candidates");
        let (min, _) = run(7, |c| c.contains(&6));
        assert_eq!(min, vec![6]);
    }

    #[test]
    fn the_result_is_one_minimal() {
        let fails = |c: &[usize]| c.iter().filter(|x| **x % 3 == 0).count() >= 3;
        let (min, _) = run(12, fails);
        assert!(fails(&min));
        for i in 0..min.len() {
            let mut less = min.clone();
            less.remove(i);
            assert!(!fails(&less), "{less:?} still fails");
        }
    }

    #[test]
    fn nothing_to_remove_from_one_item_or_a_set_that_needs_all() {
        assert_eq!(run(1, |_| true).0, vec![0]);
        assert_eq!(run(4, |c| c.len() == 4).0, vec![0, 1, 2, 3]);
    }
}

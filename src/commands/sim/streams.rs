//! The simulated world's randomness: one ChaCha stream per purpose and per link or node, every
//! one derived from the run's seed. What one link, one client or one power cut draws never
//! moves what another draws, so a fault removed while shrinking changes the draws of what it
//! touched (and of what that caused), not every later delay of the run, as one shared stream
//! did: the k-th message on a link gets the same latency whatever happened elsewhere before it.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// What a draw is for; each has a stream of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stream {
    /// A message's latency (and a lossy link's retransmissions) from one server to another.
    Link { from: u64, to: u64 },
    /// When a server pair's election connection is dialed again after it dropped.
    Redial { pair: (u64, u64) },
    /// A client's request to its server and the reply back.
    Client { client: usize },
    /// How many bytes of its unsynced tail a server's power cut tears.
    Torn { sid: u64 },
    /// How long each of a server's fsyncs takes.
    Fsync { sid: u64 },
}

impl Stream {
    /// ChaCha's stream number: the purpose in the top byte, its ids below it (server ids and
    /// client indexes are small: 28 bits each is far more than a cluster has).
    fn number(self) -> u64 {
        let (purpose, a, b) = match self {
            Stream::Link { from, to } => (1, from, to),
            Stream::Redial { pair } => (2, pair.0, pair.1),
            Stream::Client { client } => (3, client as u64, 0),
            Stream::Torn { sid } => (4, sid, 0),
            Stream::Fsync { sid } => (5, sid, 0),
        };
        (purpose << 56) | ((a & 0x0fff_ffff) << 28) | (b & 0x0fff_ffff)
    }
}

/// Every stream of one run, created on first use.
pub struct Streams {
    seed: u64,
    open: BTreeMap<Stream, ChaCha8Rng>,
}

impl Streams {
    pub fn new(seed: u64) -> Streams {
        Streams {
            seed,
            open: BTreeMap::new(),
        }
    }

    /// The generator of `stream`, where it left off.
    pub fn of(&mut self, stream: Stream) -> &mut ChaCha8Rng {
        let seed = self.seed;
        self.open.entry(stream).or_insert_with(|| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(stream.number());
            rng
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    fn draws(s: &mut Streams, stream: Stream, n: usize) -> Vec<u64> {
        (0..n)
            .map(|_| s.of(stream).gen_range(0..1_000_000))
            .collect()
    }

    #[test]
    fn a_links_draws_do_not_depend_on_what_other_streams_drew_before() {
        let link = Stream::Link { from: 1, to: 2 };
        let mut quiet = Streams::new(7);
        let alone = draws(&mut quiet, link, 20);
        let mut busy = Streams::new(7);
        let mut interleaved = Vec::new();
        for i in 0..20 {
            draws(&mut busy, Stream::Link { from: 2, to: 1 }, 3);
            draws(&mut busy, Stream::Client { client: i % 4 }, 1);
            draws(&mut busy, Stream::Redial { pair: (1, 3) }, 2);
            interleaved.extend(draws(&mut busy, link, 1));
        }
        assert_eq!(alone, interleaved);
    }

    #[test]
    fn streams_differ_by_purpose_direction_and_seed() {
        let first = |seed, stream| draws(&mut Streams::new(seed), stream, 8);
        let a = first(7, Stream::Link { from: 1, to: 2 });
        assert_ne!(a, first(7, Stream::Link { from: 2, to: 1 }));
        assert_ne!(a, first(7, Stream::Redial { pair: (1, 2) }));
        assert_ne!(a, first(8, Stream::Link { from: 1, to: 2 }));
        assert_ne!(
            first(7, Stream::Client { client: 1 }),
            first(7, Stream::Torn { sid: 1 })
        );
        assert_eq!(a, first(7, Stream::Link { from: 1, to: 2 }));
    }
}

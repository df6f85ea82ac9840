//! Loading a history file into a `Digest`: `history::read` decodes it (in parallel parts for a
//! large file: decoding is nearly all of a check's time) and each part's lines go to its own
//! `DigestBuilder`; the parts are then joined. Also returns each event's byte offset, so
//! evidence can quote the original events.

use super::model::{Digest, DigestBuilder, NodeIx};
use crate::history::file::HistoryFile;
use crate::history::line::Line;
use crate::history::read::{self, Located, Part};
use crate::history::test_info::TestInfo;
use anyhow::Result;
use std::path::Path;

/// A fold of the history's lines that rides along the checkers' pass (`RunFiles::load`), so
/// that another reader of the history (the report) does not read it again: one empty fold
/// per run, a clone of it per part of the file, the parts joined in file order.
pub trait Rider: Clone + Send + Sync {
    /// What the joined parts make.
    type Joined;
    /// The empty fold for the run of `info` and its opened `history`.
    fn new(info: &TestInfo, history: &HistoryFile) -> Result<Self>;
    /// Takes the part's next line.
    fn line(&mut self, at: Located, line: &Line<'_>);
    /// Joins the parts of one pass, in file order (`self`: what a history without lines
    /// leaves).
    fn join(self, parts: Vec<Part<Self>>) -> Self::Joined;
}

/// No rider: the checkers' pass alone.
impl Rider for () {
    type Joined = ();
    fn new(_: &TestInfo, _: &HistoryFile) -> Result<()> {
        Ok(())
    }
    fn line(&mut self, _: Located, _: &Line<'_>) {}
    fn join(self, _: Vec<Part<()>>) {}
}

/// Reads a history file into a digest and each event's byte offset (parts as
/// `read::parts_for` says).
pub fn digest_file(path: &Path, nodes: &[String]) -> Result<(Digest, Vec<u64>)> {
    digest_opened(&HistoryFile::open(path)?, nodes, None)
}

/// `digest_file` in a chosen number of parts (tests use it on small files).
pub fn digest_file_in(path: &Path, nodes: &[String], parts: usize) -> Result<(Digest, Vec<u64>)> {
    digest_opened(&HistoryFile::open(path)?, nodes, Some(parts))
}

/// Digests an opened history in `parts` parts (None: as `read::parts_for` says).
pub fn digest_opened(
    file: &HistoryFile,
    nodes: &[String],
    parts: Option<usize>,
) -> Result<(Digest, Vec<u64>)> {
    let (digest, offsets, _) = digest_with(file, nodes, parts, || (), |_, _, _| {})?;
    Ok((digest, offsets))
}

/// `digest_opened`, with a rider: each part's lines also go, in order, through a fold of the
/// caller's (`init`, `step`), whose parts come back in file order for the caller to join.
pub fn digest_with<R: Send>(
    file: &HistoryFile,
    nodes: &[String],
    parts: Option<usize>,
    init: impl Fn() -> R + Sync,
    step: impl Fn(&mut R, Located, &Line<'_>) + Sync,
) -> Result<(Digest, Vec<u64>, Vec<Part<R>>)> {
    let len = file.len();
    let parts = parts.unwrap_or_else(|| read::parts_for(len));
    // Status lines are several hundred bytes; reserved but untouched room costs no memory.
    let per_part = (len / 160 / parts.max(1) as u64) as usize;
    let parts = read::fold_parts(
        file,
        parts,
        || {
            let mut b = DigestBuilder::new(nodes);
            b.reserve(per_part);
            (b, Vec::with_capacity(per_part), init())
        },
        |(b, offsets, rider), at, line, election| {
            b.line(at.pos, line, election);
            offsets.push(at.offset);
            step(rider, at, line);
        },
    )?;
    let mut digests = Vec::with_capacity(parts.len());
    let mut riders = Vec::with_capacity(parts.len());
    for p in parts {
        let (b, offsets, rider) = p.state;
        let (pos_base, line_base, events) = (p.pos_base, p.line_base, p.events);
        digests.push(Part {
            state: (b, offsets),
            pos_base,
            line_base,
            events,
        });
        riders.push(Part {
            state: rider,
            pos_base,
            line_base,
            events,
        });
    }
    let (digest, offsets) = join(digests);
    Ok((digest, offsets, riders))
}

/// Joins parts parsed separately: positions shift by the lines before each part, node indices
/// are mapped by name (a part may meet a node test.json does not list), and an election or a
/// config a node reported across the cut is kept once.
fn join(parts: Vec<Part<(DigestBuilder, Vec<u64>)>>) -> (Digest, Vec<u64>) {
    let mut it = parts.into_iter();
    let Some(first) = it.next() else {
        return (Digest::default(), Vec::new());
    };
    let (mut d, mut offsets) = (first.state.0.finish(), first.state.1);
    for p in it {
        let shift = p.pos_base;
        let (digest, part_offsets) = (p.state.0.finish(), p.state.1);
        let map: Vec<NodeIx> = digest
            .nodes
            .iter()
            .map(|name| match d.nodes.iter().position(|n| n == name) {
                Some(ix) => ix as NodeIx,
                None => {
                    d.nodes.push(name.clone());
                    d.reads.push(0);
                    (d.nodes.len() - 1) as NodeIx
                }
            })
            .collect();
        for (ix, reads) in digest.reads.iter().enumerate() {
            d.reads[map[ix] as usize] += reads;
        }
        d.events += digest.events;
        d.reads_with_election += digest.reads_with_election;
        let mut seen_first = vec![false; d.nodes.len()];
        for mut el in digest.elections {
            el.pos += shift;
            el.node = map[el.node as usize];
            let first_here = !std::mem::replace(&mut seen_first[el.node as usize], true);
            let repeats = d
                .elections
                .iter()
                .rev()
                .find(|e| e.node == el.node)
                .is_some_and(|e| e.summary == el.summary);
            if !(first_here && repeats) {
                d.elections.push(el);
            }
        }
        let mut config_first = vec![false; d.nodes.len()];
        for mut seen in digest.configs {
            seen.pos += shift;
            seen.node = map[seen.node as usize];
            let first_here = !std::mem::replace(&mut config_first[seen.node as usize], true);
            let repeats = (d.configs.iter().rev())
                .find(|c| c.node == seen.node)
                .is_some_and(|c| c.config == seen.config);
            if !(first_here && repeats) {
                d.configs.push(seen);
            }
        }
        (d.bad_register_values)
            .extend((digest.bad_register_values.into_iter()).map(|(pos, why)| (pos + shift, why)));
        for mut exit in digest.node_exits {
            exit.pos += shift;
            exit.node = map[exit.node as usize];
            d.node_exits.push(exit);
        }
        for mut recs in digest.parts {
            recs.iter_mut().for_each(|r| r.shift(shift, &map));
            d.parts.push(recs);
        }
        offsets.extend(part_offsets);
    }
    (d, offsets)
}

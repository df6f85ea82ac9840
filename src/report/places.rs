//! Where an event is: its history index and line number from its position, the digest's
//! only handle on an event. The report's fold notes them during the one pass, and the view's
//! feed of the digest (`view_pass`) turns positions back into what the page links to.

/// Where an event is, for the positions where the history index or the line number stops
/// being the position plus a constant (blank lines, a history that does not start at 0): a
/// handful of entries for any history.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Places {
    /// (position, history index, 1-based line number), in position order.
    marks: Vec<(u32, u64, u64)>,
}

impl Places {
    pub(super) fn note(&mut self, pos: u32, index: u64, line_no: u64) {
        let fits = self.marks.last().is_some_and(|&(p, i, l)| {
            let d = u64::from(pos - p);
            index == i + d && line_no == l + d
        });
        if !fits {
            self.marks.push((pos, index, line_no));
        }
    }

    /// The 1-based line number of the event at `pos`.
    pub fn line_no(&self, pos: u32) -> u64 {
        match self.marks.iter().rev().find(|m| m.0 <= pos) {
            Some(&(p, _, l)) => l + u64::from(pos - p),
            None => u64::from(pos) + 1,
        }
    }

    /// The history index of the event at `pos`.
    pub fn index(&self, pos: u32) -> u64 {
        match self.marks.iter().rev().find(|m| m.0 <= pos) {
            Some(&(p, i, _)) => i + u64::from(pos - p),
            None => u64::from(pos),
        }
    }

    pub(super) fn join(&mut self, next: Places, pos_base: u32, line_base: u64) {
        for (p, i, l) in next.marks {
            self.note(p + pos_base, i, l + line_base);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_follow_blank_lines_and_an_index_that_does_not_start_at_zero() {
        let mut p = Places::default();
        // Events 0-2 on lines 1-3 with indices 10-12; a blank line; events 3-4 on lines 5-6.
        for (pos, index, line) in [(0, 10, 1), (1, 11, 2), (2, 12, 3), (3, 13, 5), (4, 14, 6)] {
            p.note(pos, index, line);
        }
        assert_eq!(
            p.marks.len(),
            2,
            "one mark per change of offset: {:?}",
            p.marks
        );
        assert_eq!((p.index(1), p.line_no(1)), (11, 2));
        assert_eq!((p.index(4), p.line_no(4)), (14, 6));
        // Noted in two parts (the second's positions and lines from 0), then joined: the same.
        let (mut a, mut b) = (Places::default(), Places::default());
        [(0, 10, 1), (1, 11, 2)]
            .into_iter()
            .for_each(|(x, i, l)| a.note(x, i, l));
        [(0, 12, 1), (1, 13, 3), (2, 14, 4)]
            .into_iter()
            .for_each(|(x, i, l)| b.note(x, i, l));
        a.join(b, 2, 2);
        assert_eq!(a, p);
    }

    #[test]
    fn no_marks_means_position_is_index_and_the_line_follows() {
        let p = Places::default();
        assert_eq!((p.index(7), p.line_no(7)), (7, 8));
    }
}

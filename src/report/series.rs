//! Per-pixel-column downsampling: a time series of any length becomes at most one
//! (min, max, last) triple per column, which is all a plot of that width can show.

/// Values of one series bucketed into `columns` equal slices of `[0, t_end]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnSeries {
    t_end_ns: u64,
    buckets: Vec<Option<Bucket>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub min: f64,
    pub max: f64,
    pub last: f64,
    pub count: u64,
}

impl ColumnSeries {
    pub fn new(t_end_ns: u64, columns: usize) -> Self {
        Self {
            t_end_ns: t_end_ns.max(1),
            buckets: vec![None; columns.max(1)],
        }
    }

    /// The column a time falls in; times past the end land in the last column.
    pub fn column_of(&self, t_ns: u64) -> usize {
        let n = self.buckets.len();
        ((t_ns as u128 * n as u128 / self.t_end_ns as u128) as usize).min(n - 1)
    }

    /// The time (seconds) at the middle of a column.
    pub fn column_time_s(&self, column: usize) -> f64 {
        (column as f64 + 0.5) * self.column_width_s()
    }

    pub fn column_width_s(&self) -> f64 {
        self.t_end_ns as f64 / 1e9 / self.buckets.len() as f64
    }

    /// Takes in a series of the same columns filled from later events (the next part of a
    /// history read in parts): as if its values had been added here, in order.
    pub fn merge(&mut self, later: ColumnSeries) {
        for (mine, theirs) in self.buckets.iter_mut().zip(later.buckets) {
            *mine = match (*mine, theirs) {
                (Some(a), Some(b)) => Some(Bucket {
                    min: a.min.min(b.min),
                    max: a.max.max(b.max),
                    last: b.last,
                    count: a.count + b.count,
                }),
                (a, b) => a.or(b),
            };
        }
    }

    pub fn add(&mut self, t_ns: u64, value: f64) {
        let c = self.column_of(t_ns);
        match &mut self.buckets[c] {
            Some(b) => {
                b.min = b.min.min(value);
                b.max = b.max.max(value);
                b.last = value;
                b.count += 1;
            }
            slot @ None => {
                *slot = Some(Bucket {
                    min: value,
                    max: value,
                    last: value,
                    count: 1,
                })
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.iter().all(Option::is_none)
    }

    /// (column time in seconds, bucket) for every column that has data.
    pub fn points(&self) -> impl Iterator<Item = (f64, Bucket)> + '_ {
        self.buckets
            .iter()
            .enumerate()
            .filter_map(move |(c, b)| b.map(|b| (self.column_time_s(c), b)))
    }

    /// Runs of consecutive columns with data: a line is drawn through each run, and a gap
    /// (the node was down, nothing was read) stays a gap.
    pub fn segments(&self) -> Vec<Vec<(f64, Bucket)>> {
        let mut out: Vec<Vec<(f64, Bucket)>> = Vec::new();
        let mut current = Vec::new();
        for (c, b) in self.buckets.iter().enumerate() {
            match b {
                Some(b) => current.push((self.column_time_s(c), *b)),
                None if !current.is_empty() => out.push(std::mem::take(&mut current)),
                None => {}
            }
        }
        if !current.is_empty() {
            out.push(current);
        }
        out
    }

    /// (min, max) over every bucket, or None when empty.
    pub fn range(&self) -> Option<(f64, f64)> {
        self.points().fold(None, |acc, (_, b)| match acc {
            None => Some((b.min, b.max)),
            Some((lo, hi)) => Some((lo.min(b.min), hi.max(b.max))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_million_points_become_one_bucket_per_column() {
        let mut s = ColumnSeries::new(1_000_000, 10);
        for t in 0..1_000_000u64 {
            s.add(t, (t % 7) as f64);
        }
        let points: Vec<_> = s.points().collect();
        assert_eq!(points.len(), 10);
        assert!(points.iter().all(|(_, b)| b.min == 0.0 && b.max == 6.0));
        assert_eq!(points.iter().map(|(_, b)| b.count).sum::<u64>(), 1_000_000);
    }

    #[test]
    fn gaps_split_segments_and_late_times_clamp() {
        let mut s = ColumnSeries::new(100, 10);
        s.add(5, 1.0);
        s.add(15, 2.0);
        s.add(55, 3.0);
        s.add(500, 4.0);
        let segs = s.segments();
        assert_eq!(segs.len(), 3);
        assert_eq!(segs[2][0].1.last, 4.0);
        assert_eq!(s.range(), Some((1.0, 4.0)));
    }

    #[test]
    fn a_series_filled_in_two_halves_and_merged_is_the_series_filled_at_once() {
        let values = [
            (3, 5.0),
            (7, -1.0),
            (12, 2.0),
            (14, 9.0),
            (15, 4.0),
            (61, 0.5),
        ];
        let mut whole = ColumnSeries::new(100, 10);
        values.iter().for_each(|&(t, v)| whole.add(t, v));
        // Cut inside column 1 (10..20), so one bucket gets values from both halves.
        let (mut first, mut second) = (ColumnSeries::new(100, 10), ColumnSeries::new(100, 10));
        values[..3].iter().for_each(|&(t, v)| first.add(t, v));
        values[3..].iter().for_each(|&(t, v)| second.add(t, v));
        first.merge(second);
        assert_eq!(first, whole);
        let column_1 = whole.points().nth(1).unwrap().1;
        assert_eq!(
            (column_1.min, column_1.max, column_1.last, column_1.count),
            (2.0, 9.0, 4.0, 3)
        );
    }
}

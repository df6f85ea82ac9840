//! Per-pixel-column downsampling: a time series of any length becomes at most one
//! (min, max, last) triple per column, which is all a plot of that width can show.

/// Values of one series bucketed into `columns` equal slices of `[0, t_end]`.
#[derive(Debug, Clone)]
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
}

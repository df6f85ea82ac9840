//! Client operations: latency of each operation over time colored by outcome (ok, fail,
//! info), and throughput of completed operations, with the faults shaded behind both.
//! Per pixel column the fastest and slowest operation of each outcome are drawn.

use super::style::{self, Key, FONT};
use super::{drawing_error, Drawing};
use crate::report::scan::RunData;
use crate::report::scan::COLUMNS;
use crate::report::series::ColumnSeries;
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

pub struct Writes<'a>(pub &'a RunData);

pub const SIZE: (u32, u32) = (style::WIDTH, 620);

const OK: RGBColor = RGBColor(44, 160, 44);
const FAIL: RGBColor = RGBColor(214, 39, 40);
const INFO: RGBColor = RGBColor(230, 160, 0);

impl Writes<'_> {
    pub fn has_ops(&self) -> bool {
        let o = &self.0.ops;
        !(o.ok.is_empty() && o.fail.is_empty() && o.info.is_empty())
    }
}

impl Drawing for Writes<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let data = self.0;
        root.fill(&WHITE).map_err(drawing_error)?;
        let t_end = style::t_end_s(data.t_end_ns);
        let (top, bottom) = root.split_vertically(390);
        let ops = [
            ("ok", &data.ops.ok, OK),
            ("fail", &data.ops.fail, FAIL),
            ("info (unknown)", &data.ops.info, INFO),
        ];
        let max_latency = ops
            .iter()
            .filter_map(|(_, s, _)| s.range())
            .map(|r| r.1)
            .fold(1.0f64, f64::max)
            * 1.1;
        let mut keys: Vec<Key> = ops
            .iter()
            .filter(|(_, s, _)| !s.is_empty())
            .map(|(name, _, c)| Key::new(*name, *c, 1.0))
            .collect();
        keys.extend(style::fault_keys(&data.faults));
        keys.extend(style::violation_keys(&data.violations));
        let body = style::header(&top, "Client operations: latency and throughput", &keys)?;
        let mut chart = ChartBuilder::on(&body)
            .margin_top(6)
            .margin_right(20)
            .margin_left(10)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..t_end, 0f64..max_latency)
            .map_err(drawing_error)?;
        chart
            .configure_mesh()
            .y_desc("latency (ms)")
            .label_style((FONT, 13))
            .draw()
            .map_err(drawing_error)?;
        style::shade_faults(&mut chart, &data.faults, (0.0, max_latency))?;
        style::mark_violations(&mut chart, &data.violations, (0.0, max_latency))?;
        for (_, series, color) in ops {
            chart
                .draw_series(series.points().flat_map(|(t, b)| {
                    let dot = move |y| Circle::new((t, y), 2, color.filled());
                    if b.min == b.max {
                        vec![dot(b.max)]
                    } else {
                        vec![dot(b.min), dot(b.max)]
                    }
                }))
                .map_err(drawing_error)?;
        }
        if !self.has_ops() {
            style::centered_note(&top, "no client operations in the history")?;
        }
        throughput(&bottom, data, &data.ops.ok, t_end)
    }
}

fn throughput<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    data: &RunData,
    ok: &ColumnSeries,
    t_end: f64,
) -> Result<()> {
    // Throughput needs wider bins than latency: ~1 s, and at least 60 bins per plot.
    let col_s = ok.column_width_s().max(1e-9);
    let per_bin = ((1.0 / col_s).ceil() as usize).clamp(1, (COLUMNS / 60).max(1));
    let bin_s = col_s * per_bin as f64;
    let bins = COLUMNS.div_ceil(per_bin);
    let mut counts = vec![0u64; bins];
    for (t, b) in ok.points() {
        counts[((t / bin_s) as usize).min(bins - 1)] += b.count;
    }
    // A step line: each bin's rate holds across the bin.
    let rate: Vec<(f64, f64)> = counts
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            let r = *c as f64 / bin_s;
            [(i as f64 * bin_s, r), ((i + 1) as f64 * bin_s, r)]
        })
        .collect();
    let max_rate = rate.iter().map(|p| p.1).fold(1.0f64, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(area)
        .margin_right(20)
        .margin_left(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..t_end, 0f64..max_rate)
        .map_err(drawing_error)?;
    chart
        .configure_mesh()
        .x_desc("time since start (s)")
        .y_desc("ok ops/s")
        .label_style((FONT, 13))
        .draw()
        .map_err(drawing_error)?;
    style::shade_faults(&mut chart, &data.faults, (0.0, max_rate))?;
    style::mark_violations(&mut chart, &data.violations, (0.0, max_rate))?;
    chart
        .draw_series(LineSeries::new(rate, OK.stroke_width(1)))
        .map_err(drawing_error)?;
    Ok(())
}

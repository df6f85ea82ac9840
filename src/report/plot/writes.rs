//! Client operations: latency of each operation over time colored by outcome (ok, fail,
//! info), and throughput of completed operations, with the faults shaded behind both.
//! Per pixel column the fastest and slowest operation of each outcome are drawn.

use super::style::{self, Key, FONT};
use super::{drawing_error, Drawing};
use crate::report::scan::RunData;
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
        let mut chart = ChartBuilder::on(&top)
            .caption("Client operations: latency and throughput", (FONT, 20))
            .margin_top(8)
            .margin_right(20)
            .margin_left(10)
            .set_label_area_size(LabelAreaPosition::Top, 28)
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
        let mut keys: Vec<Key> = ops
            .iter()
            .filter(|(_, s, _)| !s.is_empty())
            .map(|(name, _, c)| Key::new(*name, *c, 1.0))
            .collect();
        keys.extend(style::fault_keys(&data.faults));
        style::legend_row(&top, &keys, (90, 34))?;
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
    let width_s = ok.column_width_s().max(1e-9);
    let rate: Vec<(f64, f64)> = ok
        .points()
        .map(|(t, b)| (t, b.count as f64 / width_s))
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
    // Columns without completions are zero throughput, not missing data.
    let mut line = Vec::with_capacity(rate.len() * 2);
    let mut next = rate.iter().peekable();
    let columns = (t_end / width_s).round() as usize;
    for c in 0..columns {
        let t = (c as f64 + 0.5) * width_s;
        let v = match next.peek() {
            Some((pt, v)) if (pt - t).abs() < width_s / 2.0 => {
                let v = *v;
                next.next();
                v
            }
            _ => 0.0,
        };
        line.push((t, v));
    }
    chart
        .draw_series(LineSeries::new(line, OK.stroke_width(1)))
        .map_err(drawing_error)?;
    Ok(())
}

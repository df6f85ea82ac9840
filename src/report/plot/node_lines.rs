//! One line per node of a per-column series over time (epochs, zxids, clock offsets), with
//! gaps where the node could not be read and the faults shaded behind.

use super::drawing_error;
use super::style::{self, Key, FONT};
use crate::report::scan::{NodeData, RunData};
use crate::report::series::ColumnSeries;
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

/// What one panel of node lines shows.
pub struct Panel<'a> {
    pub caption: Option<&'a str>,
    pub y_desc: &'a str,
    pub pick: fn(&NodeData) -> &ColumnSeries,
    pub x_desc: bool,
}

pub fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    data: &RunData,
    panel: &Panel,
) -> Result<()> {
    let t_end = style::t_end_s(data.t_end_ns);
    let (lo, hi) = data
        .nodes
        .values()
        .filter_map(|n| (panel.pick)(n).range())
        .fold(None, |acc: Option<(f64, f64)>, (a, b)| match acc {
            None => Some((a, b)),
            Some((x, y)) => Some((x.min(a), y.max(b))),
        })
        .unwrap_or((0.0, 1.0));
    // Leave room so flat lines sit inside the frame, not on it.
    let pad = ((hi - lo) * 0.08).max(0.5);
    let (lo, hi) = (lo - pad, hi + pad);
    let body = match panel.caption {
        Some(title) => {
            let mut keys: Vec<Key> = data
                .nodes
                .keys()
                .enumerate()
                .map(|(i, n)| Key::new(n.clone(), style::node_color(i), 1.0))
                .collect();
            keys.extend(style::fault_keys(&data.faults));
            keys.extend(style::violation_keys(&data.violations));
            style::header(area, title, &keys)?
        }
        None => area.clone(),
    };
    let mut builder = ChartBuilder::on(&body);
    builder
        .margin_top(6)
        .margin_right(20)
        .margin_left(10)
        .y_label_area_size(80);
    builder.x_label_area_size(if panel.x_desc { 40 } else { 26 });
    let mut chart = builder
        .build_cartesian_2d(0f64..t_end, lo..hi)
        .map_err(drawing_error)?;
    let mut mesh = chart.configure_mesh();
    mesh.y_desc(panel.y_desc).label_style((FONT, 13));
    if panel.x_desc {
        mesh.x_desc("time since start (s)");
    }
    mesh.draw().map_err(drawing_error)?;
    style::shade_faults(&mut chart, &data.faults, (lo, hi))?;
    style::mark_violations(&mut chart, &data.violations, (lo, hi))?;
    for (i, node) in data.nodes.values().enumerate() {
        let color = style::node_color(i);
        for segment in (panel.pick)(node).segments() {
            // Within a column the value may move: draw its spread (when it spans a pixel:
            // a clock offset's millisecond jitter would be thousands of invisible SVG
            // elements), then the line through the last values.
            let spreads: Vec<_> = segment
                .iter()
                .filter(|(t, b)| {
                    b.min != b.max
                        && chart.backend_coord(&(*t, b.min)).1
                            != chart.backend_coord(&(*t, b.max)).1
                })
                .map(|(t, b)| PathElement::new(vec![(*t, b.min), (*t, b.max)], color))
                .collect();
            chart.draw_series(spreads).map_err(drawing_error)?;
            let points: Vec<(f64, f64)> = segment.iter().map(|(t, b)| (*t, b.last)).collect();
            if points.len() == 1 {
                chart
                    .draw_series(std::iter::once(Circle::new(points[0], 2, color.filled())))
                    .map_err(drawing_error)?;
            } else {
                chart
                    .draw_series(LineSeries::new(points, color.stroke_width(2)))
                    .map_err(drawing_error)?;
            }
        }
    }
    if data.nodes.values().all(|n| (panel.pick)(n).is_empty()) {
        style::centered_note(area, "no readings in the history")?;
    }
    Ok(())
}

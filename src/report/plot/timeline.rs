//! The leader timeline: one lane per node, colored by state, the leader's sid and epoch
//! written on LEADING spans, fault intervals shaded behind the lanes, violations marked.
//! `Zoomed` is the same drawing over a few seconds around one violation.

use super::style::{self, Key, FONT};
use super::{drawing_error, Drawing};
use crate::report::lane::LaneState;
use crate::report::scan::RunData;
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

pub struct Timeline<'a>(pub &'a RunData);

/// The timeline between two times (ns), titled.
pub struct Zoomed<'a> {
    pub data: &'a RunData,
    pub from_ns: u64,
    pub to_ns: u64,
    pub title: String,
}

const LANE_PX: u32 = 44;
const TOP_PX: u32 = 70;
const BOTTOM_PX: u32 = 50;

impl Timeline<'_> {
    pub fn size(&self) -> (u32, u32) {
        let lanes = self.0.nodes.len().max(1) as u32;
        (style::WIDTH, TOP_PX + BOTTOM_PX + LANE_PX * lanes)
    }
}

const STATES: [LaneState; 5] = [
    LaneState::Leading,
    LaneState::Following,
    LaneState::Looking,
    LaneState::Observing,
    LaneState::Down,
];

impl Drawing for Timeline<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let t_end = style::t_end_s(self.0.t_end_ns);
        draw_lanes(root, self.0, (0.0, t_end), "Leader timeline")
    }
}

impl Drawing for Zoomed<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let (a, b) = (self.from_ns as f64 / 1e9, self.to_ns as f64 / 1e9);
        draw_lanes(root, self.data, (a, b.max(a + 1e-3)), &self.title)
    }
}

fn draw_lanes<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    data: &RunData,
    (t_start, t_end): (f64, f64),
    title: &str,
) -> Result<()> {
    root.fill(&WHITE).map_err(drawing_error)?;
    let lanes = data.nodes.len().max(1) as f64;
    let mut keys: Vec<Key> = STATES
        .into_iter()
        .filter(|s| {
            data.nodes
                .values()
                .any(|n| n.spans.iter().any(|x| x.state == *s))
        })
        .map(|s| Key::new(s.name(), style::lane_color(s), 1.0))
        .collect();
    keys.extend(style::fault_keys(&data.faults));
    keys.extend(style::violation_keys(&data.violations));
    let body = style::header(root, title, &keys)?;
    let mut chart = ChartBuilder::on(&body)
        .margin_top(6)
        .margin_right(20)
        .margin_left(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(t_start..t_end, 0f64..lanes)
        .map_err(drawing_error)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_desc("time since start (s)")
        .label_style((FONT, 13))
        .draw()
        .map_err(drawing_error)?;
    style::shade_faults(&mut chart, &data.faults, (0.0, lanes))?;

    let plot_px = chart.plotting_area().dim_in_pixel().0.max(1) as f64;
    let px_s = (t_end - t_start) / plot_px;
    let label_font = (FONT, 12).into_font().color(&WHITE);
    for (i, (name, node)) in data.nodes.iter().enumerate() {
        let y = lanes - 1.0 - i as f64;
        // Per pixel column the first state drawn wins: sub-pixel flaps cannot bloat
        // the SVG or hide the lane.
        let mut drawn_to = f64::NEG_INFINITY;
        let mut rects = Vec::new();
        let mut labels = Vec::new();
        for span in &node.spans {
            let (a, b) = (span.start_ns as f64 / 1e9, span.end_ns as f64 / 1e9);
            let b = b.max(a + px_s).min(t_end);
            let a = a.max(t_start);
            if b <= drawn_to || b <= a {
                continue;
            }
            let a = a.max(drawn_to);
            drawn_to = b;
            rects.push(Rectangle::new(
                [(a, y + 0.18), (b, y + 0.82)],
                style::lane_color(span.state).filled(),
            ));
            if span.state == LaneState::Leading {
                let width_px = (b - a) / px_s;
                let sid = crate::history::sid_of(name).unwrap_or(0);
                let text = if width_px > 110.0 {
                    format!("leader {sid} · epoch {}", span.epoch)
                } else if width_px > 46.0 {
                    format!("{sid} e{}", span.epoch)
                } else {
                    continue;
                };
                labels.push(Text::new(
                    text,
                    (a + 3.0 * px_s, y + 0.62),
                    label_font.clone(),
                ));
            }
        }
        chart.draw_series(rects).map_err(drawing_error)?;
        chart.draw_series(labels).map_err(drawing_error)?;
        let (px, py) = chart.backend_coord(&(t_start, y + 0.5));
        root.draw(&Text::new(
            name.clone(),
            (px - 40, py - 7),
            (FONT, 14).into_font(),
        ))
        .map_err(drawing_error)?;
    }
    style::mark_violations(&mut chart, &data.violations, (0.0, lanes))?;
    if data.nodes.values().all(|n| n.spans.is_empty()) {
        style::centered_note(root, "no status reads in the history")?;
    }
    Ok(())
}

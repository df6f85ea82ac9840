//! The trends plots: one panel per series (matrix: schedule on target), by date. Verdict counts
//! (valid, invalid, unknown, no verdict) in one image, recovery p50/p99 (to a quorum-backed
//! leader and to every node rejoined) in another. Drawn with the report's plotters setup
//! (`report::plot::render`: PNG checked not blank, plus SVG).

use super::trends::TrendRow;
use crate::report::plot::style::{self, Key, FONT};
use crate::report::plot::{drawing_error, render as render_plot, Drawing, Plot};
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

const PANEL_HEIGHT: u32 = 260;
const COLUMNS: usize = 2;

/// Renders both plots into `out`.
pub fn render(out: &Path, rows: &[TrendRow]) -> Result<Vec<Plot>> {
    let series = by_series(rows);
    let first = rows.iter().map(|r| r.started_at).min();
    let panels = series.len().max(1);
    let height = style::HEADER_PX + PANEL_HEIGHT * panels.div_ceil(COLUMNS) as u32;
    let size = (style::WIDTH, height);
    let verdicts = Trends {
        series: &series,
        first,
        kind: Kind::Verdicts,
    };
    let recovery = Trends {
        series: &series,
        first,
        kind: Kind::Recovery,
    };
    Ok(vec![
        render_plot(
            out,
            "trends-verdicts",
            "Verdicts per night",
            size,
            &verdicts,
            None,
        )?,
        render_plot(
            out,
            "trends-recovery",
            "Recovery p50/p99 per night",
            size,
            &recovery,
            None,
        )?,
    ])
}

type Series<'a> = BTreeMap<String, Vec<&'a TrendRow>>;

fn by_series(rows: &[TrendRow]) -> Series<'_> {
    let mut s: Series = BTreeMap::new();
    for r in rows {
        s.entry(r.series()).or_default().push(r);
    }
    for v in s.values_mut() {
        v.sort_by_key(|r| r.started_at);
    }
    s
}

#[derive(Clone, Copy)]
enum Kind {
    Verdicts,
    Recovery,
}

struct Trends<'a> {
    series: &'a Series<'a>,
    first: Option<chrono::DateTime<chrono::Utc>>,
    kind: Kind,
}

/// A line of one panel: its label, color, and value of a row.
type Line = (&'static str, RGBColor, fn(&TrendRow) -> Option<f64>);

const VERDICT_LINES: [Line; 4] = [
    ("valid", RGBColor(46, 125, 50), |r| Some(r.valid as f64)),
    ("invalid", RGBColor(198, 40, 40), |r| Some(r.invalid as f64)),
    ("unknown", RGBColor(239, 108, 0), |r| Some(r.unknown as f64)),
    ("no verdict", RGBColor(90, 90, 90), |r| {
        Some(r.no_verdict as f64)
    }),
];

/// Milliseconds as seconds, the recovery plot's unit (a conversion, not a text).
fn ms_to_s(ms: Option<u64>) -> Option<f64> {
    ms.map(|ms| ms as f64 / 1e3)
}

const RECOVERY_LINES: [Line; 4] = [
    ("to leader p50", RGBColor(31, 119, 180), |r| {
        ms_to_s(r.recovery_p50_ms)
    }),
    ("to leader p99", RGBColor(140, 190, 230), |r| {
        ms_to_s(r.recovery_p99_ms)
    }),
    ("all rejoined p50", RGBColor(44, 160, 44), |r| {
        ms_to_s(r.rejoin_p50_ms)
    }),
    ("all rejoined p99", RGBColor(150, 215, 150), |r| {
        ms_to_s(r.rejoin_p99_ms)
    }),
];

impl Trends<'_> {
    fn lines(&self) -> &'static [Line; 4] {
        match self.kind {
            Kind::Verdicts => &VERDICT_LINES,
            Kind::Recovery => &RECOVERY_LINES,
        }
    }

    /// Days since the first sweep.
    fn x(&self, r: &TrendRow) -> f64 {
        let first = self.first.unwrap_or(r.started_at);
        (r.started_at - first).num_seconds() as f64 / 86_400.0
    }

    fn panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        name: &str,
        rows: &[&TrendRow],
    ) -> Result<()> {
        let xs: Vec<f64> = rows.iter().map(|r| self.x(r)).collect();
        let (x0, x1) = (
            xs.iter().copied().fold(f64::INFINITY, f64::min),
            xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        );
        // One night alone still gets an axis around it.
        let pad = ((x1 - x0) * 0.05).max(0.5);
        let y_max = rows
            .iter()
            .flat_map(|r| self.lines().iter().filter_map(|(_, _, f)| f(r)))
            .fold(1.0f64, f64::max)
            * 1.15;
        let first = self.first;
        // Nights a day or more apart read as dates; sweeps within a few days also by hour.
        let format = if x1 - x0 < 3.0 {
            "%m-%d %H:%M"
        } else {
            "%m-%d"
        };
        let date = move |x: &f64| match first {
            Some(f) => (f + chrono::Duration::seconds((x * 86_400.0) as i64))
                .format(format)
                .to_string(),
            None => String::new(),
        };
        let mut chart = ChartBuilder::on(area)
            .caption(name, (FONT, 15))
            .margin(8)
            .x_label_area_size(26)
            .y_label_area_size(48)
            .build_cartesian_2d((x0 - pad)..(x1 + pad), 0f64..y_max)
            .map_err(drawing_error)?;
        chart
            .configure_mesh()
            .x_labels(6)
            .x_label_formatter(&date)
            .y_desc(match self.kind {
                Kind::Verdicts => "runs",
                Kind::Recovery => "seconds",
            })
            .label_style((FONT, 12))
            .draw()
            .map_err(drawing_error)?;
        for (_, color, value) in self.lines() {
            let points: Vec<(f64, f64)> = rows
                .iter()
                .filter_map(|r| value(r).map(|v| (self.x(r), v)))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(drawing_error)?;
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 4, color.filled())),
                )
                .map_err(drawing_error)?;
        }
        Ok(())
    }
}

impl Drawing for Trends<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        root.fill(&WHITE).map_err(drawing_error)?;
        let keys: Vec<Key> = self
            .lines()
            .iter()
            .map(|(label, color, _)| Key::new(*label, *color, 1.0))
            .collect();
        let title = match self.kind {
            Kind::Verdicts => "Verdicts per night, per schedule and target",
            Kind::Recovery => {
                "Recovery p50/p99 per night (to a quorum-backed leader; every node rejoined)"
            }
        };
        let body = style::header(root, title, &keys)?;
        if self.series.is_empty() {
            return style::centered_note(&body, "no sweeps recorded yet");
        }
        let rows = self.series.len().div_ceil(COLUMNS);
        let areas = body.split_evenly((rows, COLUMNS));
        for ((name, series), area) in self.series.iter().zip(areas.iter()) {
            self.panel(area, name, series)?;
        }
        Ok(())
    }
}

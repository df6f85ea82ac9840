//! Shared look of the plots: sizes, colors of lane states and fault kinds, the fault shading
//! drawn behind every time plot (as Jepsen shades nemesis activity) and the legend.

use super::drawing_error;
use crate::history::view::FaultInterval;
use crate::history::FaultKind;
use crate::report::lane::LaneState;
use crate::report::violations::Violation;
use anyhow::Result;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

pub const WIDTH: u32 = 1280;
pub const FONT: &str = "sans-serif";

pub type TimeChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

pub fn lane_color(state: LaneState) -> RGBColor {
    match state {
        LaneState::Leading => RGBColor(44, 160, 44),
        LaneState::Following => RGBColor(31, 119, 180),
        LaneState::Looking => RGBColor(230, 180, 0),
        // Apart from every fault's shade (a pause is purple): an observer's lane reads as such.
        LaneState::Observing => RGBColor(102, 194, 165),
        LaneState::Down => RGBColor(90, 90, 90),
    }
}

/// A kind's shade (`history::KindFacts::colour`).
pub fn fault_color(kind: FaultKind) -> RGBColor {
    let (r, g, b) = kind.facts().colour;
    RGBColor(r, g, b)
}

/// The color of a checker's markers: one per checker name, stable across runs, none of them
/// a lane or fault color's near twin.
pub fn checker_color(name: &str) -> RGBColor {
    const P: [RGBColor; 6] = [
        RGBColor(200, 0, 60),
        RGBColor(120, 0, 160),
        RGBColor(0, 90, 200),
        RGBColor(160, 80, 0),
        RGBColor(0, 130, 110),
        RGBColor(90, 90, 0),
    ];
    let i = crate::checker::names()
        .position(|n| n == name)
        .unwrap_or_else(|| name.bytes().map(usize::from).sum());
    P[i % P.len()]
}

/// A palette for per-node lines, distinct for up to ten nodes.
pub fn node_color(i: usize) -> RGBColor {
    const P: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    P[i % P.len()]
}

/// Shades each fault interval across the chart's full height (one still in force at the end
/// runs to the chart's right edge).
pub fn shade_faults<DB: DrawingBackend>(
    chart: &mut TimeChart<DB>,
    faults: &[FaultInterval],
    (y0, y1): (f64, f64),
) -> Result<()> {
    let (left, right) = (chart.x_range().start, chart.x_range().end);
    chart
        .draw_series(faults.iter().filter_map(|f| {
            // Clipped to the chart: a zoomed plot shows only what is inside it.
            let a = (f.start_ns as f64 / 1e9).max(left);
            let b = f.end_ns.map_or(right, |e| e as f64 / 1e9).min(right);
            (b >= a).then_some(())?;
            Some(Rectangle::new(
                [(a, y0), (b, y1)],
                fault_color(f.kind).mix(0.16).filled(),
            ))
        }))
        .map_err(drawing_error)?;
    Ok(())
}

/// A line at each violation (evidence time of an invalid checker) in its checker's color,
/// the checker's name written once at its first line. Lines closer than a pixel are one.
pub fn mark_violations<DB: DrawingBackend>(
    chart: &mut TimeChart<DB>,
    violations: &[Violation],
    (y0, y1): (f64, f64),
) -> Result<()> {
    let range = chart.x_range();
    let px = chart.plotting_area().dim_in_pixel().0.max(1) as f64;
    let px_s = (range.end - range.start) / px;
    let mut last: Option<(&str, f64)> = None;
    let mut labelled: Vec<&str> = Vec::new();
    for v in violations {
        let x = v.time_ns as f64 / 1e9;
        if x < range.start || x > range.end {
            continue;
        }
        if last.is_some_and(|(c, t)| c == v.checker && x - t < px_s) {
            continue;
        }
        last = Some((&v.checker, x));
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x, y0), (x, y1)],
                v.color.stroke_width(2),
            )))
            .map_err(drawing_error)?;
        if !labelled.contains(&v.checker.as_str()) {
            labelled.push(&v.checker);
            let font = (FONT, 13).into_font().color(&v.color);
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("✕ {}", v.checker),
                    (x + 3.0 * px_s, y1 - (y1 - y0) * 0.01),
                    font,
                )))
                .map_err(drawing_error)?;
        }
    }
    Ok(())
}

/// Legend entries for the checkers with violations.
pub fn violation_keys(violations: &[Violation]) -> Vec<Key> {
    let mut keys: Vec<Key> = Vec::new();
    for v in violations {
        if !keys.iter().any(|k| k.label.starts_with(v.checker.as_str())) {
            keys.push(Key::new(format!("{} (violation)", v.checker), v.color, 1.0));
        }
    }
    keys
}

/// One legend entry: a swatch and its label.
pub struct Key {
    pub label: String,
    pub color: RGBColor,
    pub alpha: f64,
}

impl Key {
    pub fn new(label: impl Into<String>, color: RGBColor, alpha: f64) -> Self {
        Self {
            label: label.into(),
            color,
            alpha,
        }
    }
}

/// Legend entries for the fault kinds present in `faults` (as shaded in the plot).
pub fn fault_keys(faults: &[FaultInterval]) -> Vec<Key> {
    FaultKind::ALL
        .into_iter()
        .filter(|k| faults.iter().any(|f| f.kind == *k))
        .map(|k| Key::new(format!("{} (fault)", k.name()), fault_color(k), 0.35))
        .collect()
}

/// Draws a legend as one row of swatches starting at (x, y) of `area`, above the chart so
/// that it never hides data.
pub fn legend_row<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    keys: &[Key],
    (mut x, y): (i32, i32),
) -> Result<()> {
    let font: TextStyle = (FONT, 14).into_font().into();
    for key in keys {
        area.draw(&Rectangle::new(
            [(x, y), (x + 14, y + 14)],
            key.color.mix(key.alpha).filled(),
        ))
        .map_err(drawing_error)?;
        area.draw(&Text::new(key.label.clone(), (x + 19, y), font.clone()))
            .map_err(drawing_error)?;
        let (w, _) = area
            .estimate_text_size(&key.label, &font)
            .map_err(drawing_error)?;
        x += 19 + w as i32 + 18;
    }
    Ok(())
}

/// Height of the strip above each chart that holds its title and legend.
pub const HEADER_PX: u32 = 60;

/// Draws the title and the legend above the chart (never over the data) and returns the
/// area left for the chart.
pub fn header<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    keys: &[Key],
) -> Result<DrawingArea<DB, plotters::coord::Shift>> {
    let (head, body) = area.split_vertically(HEADER_PX);
    let (w, _) = head.dim_in_pixel();
    let style =
        TextStyle::from((FONT, 20).into_font()).pos(plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Top,
        ));
    head.draw(&Text::new(title.to_string(), (w as i32 / 2, 6), style))
        .map_err(drawing_error)?;
    legend_row(&head, keys, (90, 36))?;
    Ok(body)
}

/// Writes a one-line note (e.g. "no data") in the middle of an area.
pub fn centered_note<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    text: &str,
) -> Result<()> {
    let (w, h) = area.dim_in_pixel();
    let grey = BLACK.mix(0.6);
    let style = TextStyle::from((FONT, 18).into_font()).color(&grey).pos(
        plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Center,
        ),
    );
    area.draw(&Text::new(
        text.to_string(),
        (w as i32 / 2, h as i32 / 2),
        style,
    ))
    .map_err(drawing_error)?;
    Ok(())
}

/// The time axis runs from 0 to the end of the history, in seconds.
pub fn t_end_s(t_end_ns: u64) -> f64 {
    (t_end_ns as f64 / 1e9).max(1e-3)
}

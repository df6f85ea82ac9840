//! Recovery: time to a quorum-backed leader after each fault, colored by fault kind, at the
//! fault's time. Faults never recovered from are crosses on the top edge.

use super::style::{self, Key, FONT};
use super::{drawing_error, Drawing};
use crate::history::view::FaultRecovery;
use crate::history::FaultKind;
use crate::report::recovery::seconds;
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

pub struct RecoveryPlot<'a> {
    pub recoveries: &'a [FaultRecovery],
    pub t_end_ns: u64,
    pub violations: &'a [crate::report::violations::Violation],
}

pub const SIZE: (u32, u32) = (style::WIDTH, 400);

impl Drawing for RecoveryPlot<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        root.fill(&WHITE).map_err(drawing_error)?;
        let t_end = style::t_end_s(self.t_end_ns).max(
            self.recoveries
                .iter()
                .map(|r| r.start_ns as f64 / 1e9)
                .fold(0.0, f64::max)
                * 1.02,
        );
        let max_s = self
            .recoveries
            .iter()
            .filter_map(seconds)
            .fold(1.0f64, f64::max)
            * 1.15;
        let mut keys: Vec<Key> = FaultKind::ALL
            .into_iter()
            .filter(|k| self.recoveries.iter().any(|r| r.kind == *k))
            .map(|k| Key::new(k.name(), style::fault_color(k), 1.0))
            .collect();
        if self.recoveries.iter().any(|r| seconds(r).is_none()) {
            keys.push(Key::new(
                "× = no quorum-backed leader before the end",
                BLACK,
                0.0,
            ));
        }
        keys.extend(style::violation_keys(self.violations));
        let body = style::header(
            root,
            "Recovery: time to a quorum-backed leader after each fault",
            &keys,
        )?;
        let mut chart = ChartBuilder::on(&body)
            .margin_top(6)
            .margin_right(20)
            .margin_left(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..t_end, 0f64..max_s)
            .map_err(drawing_error)?;
        chart
            .configure_mesh()
            .x_desc("time of the fault (s)")
            .y_desc("recovery (s)")
            .label_style((FONT, 13))
            .draw()
            .map_err(drawing_error)?;
        style::mark_violations(&mut chart, self.violations, (0.0, max_s))?;
        for kind in FaultKind::ALL {
            let color = style::fault_color(kind);
            let of_kind = self.recoveries.iter().filter(|r| r.kind == kind);
            chart
                .draw_series(of_kind.clone().filter_map(|r| {
                    let t = r.start_ns as f64 / 1e9;
                    seconds(r).map(|s| Circle::new((t, s), 5, color.filled()))
                }))
                .map_err(drawing_error)?;
            chart
                .draw_series(of_kind.filter(|r| seconds(r).is_none()).map(|r| {
                    Cross::new(
                        (r.start_ns as f64 / 1e9, max_s * 0.97),
                        6,
                        color.stroke_width(2),
                    )
                }))
                .map_err(drawing_error)?;
        }
        if self.recoveries.is_empty() {
            style::centered_note(root, "no faults in this run")?;
        }
        Ok(())
    }
}

//! Clock offset per node over time: the node's wall clock (from its status reads) minus the
//! controller's, which shows what the clock nemesis did and when it was undone. Offsets
//! include the poll's latency, a few milliseconds.

use super::node_lines::{draw_panel, Panel};
use super::style;
use super::{drawing_error, Drawing};
use crate::report::scan::RunData;
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

pub struct Clock<'a>(pub &'a RunData);

pub const SIZE: (u32, u32) = (style::WIDTH, 380);

impl Drawing for Clock<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        root.fill(&WHITE).map_err(drawing_error)?;
        draw_panel(
            root,
            self.0,
            &Panel {
                caption: Some("Clock offset per node"),
                y_desc: "node clock − controller clock (s)",
                pick: |n| &n.clock_offset_s,
                x_desc: true,
            },
        )
    }
}

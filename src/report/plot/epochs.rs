//! Epoch and last logged zxid per node over time: a node stuck in an old epoch, or a zxid
//! that goes back, shows at a glance.

use super::node_lines::{draw_panel, Panel};
use super::style;
use super::{drawing_error, Drawing};
use crate::report::scan::RunData;
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

pub struct Epochs<'a>(pub &'a RunData);

pub const SIZE: (u32, u32) = (style::WIDTH, 640);

impl Drawing for Epochs<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        root.fill(&WHITE).map_err(drawing_error)?;
        let (top, bottom) = root.split_vertically(340);
        draw_panel(
            &top,
            self.0,
            &Panel {
                caption: Some("Epochs and last zxid per node"),
                y_desc: "current epoch",
                pick: |n| &n.epoch,
                x_desc: false,
            },
        )?;
        draw_panel(
            &bottom,
            self.0,
            &Panel {
                caption: None,
                y_desc: "last zxid (counter)",
                pick: |n| &n.zxid_counter,
                x_desc: true,
            },
        )
    }
}

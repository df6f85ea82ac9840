//! Plots: each is one drawing function generic over the plotters backend, rendered twice,
//! into a PNG (checked not to be blank: plotters without a usable font silently draws
//! nothing) and into an SVG.
//!
//! Text uses DejaVu Sans compiled into the binary, so plots render on machines without fonts.

pub mod clock;
pub mod epochs;
pub mod node_lines;
pub mod recovery;
pub mod style;
pub mod timeline;
pub mod writes;

use anyhow::{anyhow, bail, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// A rendered plot: where its files are and the PNG bytes for inlining.
#[derive(Debug, Clone)]
pub struct Plot {
    pub name: String,
    pub title: String,
    pub png: PathBuf,
    pub svg: PathBuf,
    pub png_bytes: Vec<u8>,
    pub width: u32,
    pub height: u32,
    /// Said under the plot: what is missing, where numbers came from.
    pub note: Option<String>,
}

/// Registers the embedded font once per process; drawing text before this yields blank PNGs.
pub fn register_fonts() -> Result<()> {
    static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        for (style, bytes) in [
            (FontStyle::Normal, dejavu::sans::regular()),
            (FontStyle::Bold, dejavu::sans::bold()),
        ] {
            plotters::style::register_font("sans-serif", style, bytes)
                .map_err(|_| "the embedded DejaVu Sans font could not be loaded".to_string())?;
        }
        Ok(())
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

/// Something that draws itself on any plotters backend.
pub trait Drawing {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>;
}

/// Turns a plotters error (generic over the backend) into ours.
pub fn drawing_error<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("plotters: {e:?}")
}

/// Renders `drawing` to `<dir>/<name>.png` and `<dir>/<name>.svg`.
pub fn render(
    dir: &Path,
    name: &str,
    title: &str,
    (width, height): (u32, u32),
    drawing: &impl Drawing,
    note: Option<String>,
) -> Result<Plot> {
    register_fonts()?;
    let mut rgb = vec![0u8; width as usize * height as usize * 3];
    {
        let area = BitMapBackend::with_buffer(&mut rgb, (width, height)).into_drawing_area();
        drawing
            .draw(&area)
            .with_context(|| format!("cannot draw the {name} plot"))?;
        area.present().map_err(drawing_error)?;
    }
    check_not_blank(&rgb, name)?;
    let png_bytes = encode_png(&rgb, width, height)?;
    let png = dir.join(format!("{name}.png"));
    std::fs::write(&png, &png_bytes).with_context(|| format!("cannot write {}", png.display()))?;

    let mut svg_text = String::new();
    {
        let area = SVGBackend::with_string(&mut svg_text, (width, height)).into_drawing_area();
        drawing
            .draw(&area)
            .with_context(|| format!("cannot draw the {name} plot as SVG"))?;
        area.present().map_err(drawing_error)?;
    }
    let svg = dir.join(format!("{name}.svg"));
    std::fs::write(&svg, svg_text).with_context(|| format!("cannot write {}", svg.display()))?;
    Ok(Plot {
        name: name.to_string(),
        title: title.to_string(),
        png,
        svg,
        png_bytes,
        width,
        height,
        note,
    })
}

/// A plot with text, axes and data has many colors and a fair share of non-background
/// pixels; a blank (font-less, or nothing drawn) one has one or two colors.
pub fn check_not_blank(rgb: &[u8], name: &str) -> Result<()> {
    let pixels = rgb.len() / 3;
    let background = &rgb[..3.min(rgb.len())];
    let mut colors = HashSet::new();
    let mut inked = 0usize;
    for px in rgb.chunks_exact(3) {
        if colors.len() < 64 {
            colors.insert([px[0], px[1], px[2]]);
        }
        if px != background {
            inked += 1;
        }
    }
    if colors.len() < 8 || inked * 200 < pixels {
        bail!(
            "the {name} plot came out blank ({} colors, {inked} of {pixels} pixels drawn): \
             the embedded font or the data did not render",
            colors.len()
        );
    }
    Ok(())
}

/// PNG with deflate's default level and adaptive filters: a quarter of the fast encoding's
/// bytes (the report inlines every plot) for about 15 ms a plot.
fn encode_png(rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Default);
    encoder.set_filter(png::FilterType::Sub);
    encoder.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
    let mut writer = encoder.write_header().context("cannot encode PNG")?;
    writer.write_image_data(rgb).context("cannot encode PNG")?;
    writer.finish().context("cannot encode PNG")?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blank_bitmap_is_refused_and_a_drawn_one_passes() {
        let blank = vec![255u8; 100 * 100 * 3];
        assert!(check_not_blank(&blank, "t").is_err());
        let mut drawn = blank.clone();
        for (i, px) in drawn
            .chunks_exact_mut(3)
            .enumerate()
            .filter(|(i, _)| i % 7 == 0)
        {
            px.copy_from_slice(&[(i % 200) as u8, 10, 20]);
        }
        check_not_blank(&drawn, "t").unwrap();
    }
}

//! `insitu whatif --plot`: pods at the update revision over time, one line per strategy compared.

use std::path::Path;

use plotters::prelude::*;

use super::report::Report;

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

/// Writes the SVG to `path`.
pub fn write_svg(path: &Path, r: &Report) -> anyhow::Result<()> {
    let end = r.runs.iter().map(|x| x.predicted_seconds).fold(1.0f64, f64::max) * 1.02;
    let top = r.replicas.max(1) as f64 * 1.05;
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("insitu whatif {}: {}", r.cloneset, r.change.join("; ")),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..end, 0f64..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("predicted seconds since the change")
        .y_desc("pods updated")
        .draw()
        .map_err(err)?;
    let colors = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
    ];
    for (run, color) in r.runs.iter().zip(colors.iter().cycle()) {
        let mut pts = Vec::with_capacity(run.timeline.len() * 2 + 1);
        let mut last: Option<f64> = None;
        for s in &run.timeline {
            if let Some(prev) = last {
                pts.push((s.t, prev));
            }
            pts.push((s.t, s.updated as f64));
            last = Some(s.updated as f64);
        }
        if let Some(y) = last {
            pts.push((end, y));
        }
        let c = *color;
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(err)?
            .label(format!("{} ({:.0} s)", run.strategy, run.predicted_seconds))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

//! The seed comparison's SVG timeline: updated / ready / unavailable pods over time, one line per strategy.

use std::path::Path;

use plotters::prelude::*;

use super::SeedCompareReport;
use super::timeline::Sample;

/// Which count of a sample a line shows.
type Pick = fn(&Sample) -> usize;

/// A step series (values hold until the next sample), extended to `end` so both strategies' lines run to the
/// right edge at their final value.
fn steps(samples: &[Sample], end: f64, pick: Pick) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(samples.len() * 2 + 1);
    let mut last: Option<f64> = None;
    for s in samples {
        let y = pick(s) as f64;
        if let Some(prev) = last {
            out.push((s.t, prev));
        }
        out.push((s.t, y));
        last = Some(y);
    }
    if let Some(y) = last {
        out.push((end, y));
    }
    out
}

/// Writes the SVG to `path`.
pub fn write_svg(path: &Path, r: &SeedCompareReport) -> anyhow::Result<()> {
    let end = r.in_place.total_seconds.max(r.recreate.total_seconds).max(1.0) * 1.02;
    let top = r.pods as f64 * 1.05;
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let title = format!(
        "seed-compare: {} pods, maxUnavailable {}, seed {} (virtual seconds)",
        r.pods, r.max_unavailable, r.seed
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..end, 0f64..top)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("seconds since the image change")
        .y_desc("pods")
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let series: [(&str, Pick, RGBColor); 3] = [
        ("updated", |s| s.updated, RGBColor(31, 119, 180)),
        ("ready", |s| s.ready, RGBColor(44, 160, 44)),
        ("unavailable", |s| s.unavailable, RGBColor(214, 39, 40)),
    ];
    for (run, dashed) in [(&r.in_place, false), (&r.recreate, true)] {
        for (what, pick, color) in series {
            let pts = steps(&run.timeline, end, pick);
            let label = format!("{what}, {}", run.strategy);
            let style = color.stroke_width(2);
            let drawn = if dashed {
                chart.draw_series(DashedLineSeries::new(pts, 6, 4, style))
            } else {
                chart.draw_series(LineSeries::new(pts, style))
            };
            drawn
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::MiddleRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

//! `plot.svg`: VmRSS, RssAnon and jemalloc's allocated bytes over time,
//! with the phases shaded (plotters, SVG backend).

use plotters::prelude::*;

use crate::results::PhaseSpan;
use crate::sampler::Sample;

/// Light shade of a phase.
fn phase_color(name: &str) -> RGBColor {
    match name {
        "idle" => RGBColor(200, 200, 200),
        "seq" => RGBColor(140, 180, 250),
        "conc" => RGBColor(250, 190, 120),
        "settle" => RGBColor(150, 220, 150),
        _ => RGBColor(230, 230, 160),
    }
}

/// A line broken into runs of points (time s, MiB).
type Segments = Vec<Vec<(f64, f64)>>;

/// Runs of consecutive points with a value (a failed scrape breaks a line).
fn segments(samples: &[Sample], f: impl Fn(&Sample) -> Option<f64>) -> Segments {
    let mut out: Segments = vec![Vec::new()];
    for s in samples {
        match f(s) {
            Some(v) => out.last_mut().unwrap().push((s.t_ms as f64 / 1000.0, v)),
            None if out.last().is_some_and(|l| !l.is_empty()) => out.push(Vec::new()),
            None => {}
        }
    }
    out.retain(|l| !l.is_empty());
    out
}

/// Renders the plot as an SVG document, `width` × `height` pixels.
pub fn svg(
    samples: &[Sample],
    phases: &[PhaseSpan],
    width: u32,
    height: u32,
) -> Result<String, String> {
    let mib = |kb: u64| kb as f64 / 1024.0;
    let rss = segments(samples, |s| Some(mib(s.vm_rss_kb)));
    let anon = segments(samples, |s| Some(mib(s.rss_anon_kb)));
    let jemalloc = segments(samples, |s| {
        Some(s.metrics?.jemalloc_allocated_bytes? as f64 / (1024.0 * 1024.0))
    });
    let t_end = samples
        .iter()
        .map(|s| s.t_ms)
        .chain(phases.iter().map(|p| p.end_ms))
        .max()
        .unwrap_or(1000) as f64
        / 1000.0;
    let y_max = rss
        .iter()
        .chain(&anon)
        .chain(&jemalloc)
        .flatten()
        .map(|p| p.1)
        .fold(1.0f64, f64::max)
        * 1.1;

    let mut out = String::new();
    {
        let e = |e: DrawingAreaErrorKind<_>| format!("drawing plot.svg: {e}");
        let root = SVGBackend::with_string(&mut out, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(e)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("gitstow daemon memory during the run", ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..t_end.max(0.001), 0f64..y_max)
            .map_err(e)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .x_desc("time since the daemon was ready (s)")
            .y_desc("MiB")
            .draw()
            .map_err(e)?;
        chart
            .draw_series(phases.iter().map(|p| {
                Rectangle::new(
                    [
                        (p.start_ms as f64 / 1000.0, 0.0),
                        (p.end_ms as f64 / 1000.0, y_max),
                    ],
                    phase_color(&p.name).mix(0.35).filled(),
                )
            }))
            .map_err(e)?;
        chart
            .draw_series(phases.iter().map(|p| {
                Text::new(
                    p.name.clone(),
                    (p.start_ms as f64 / 1000.0, y_max * 0.97),
                    ("sans-serif", 13).into_font().color(&BLACK),
                )
            }))
            .map_err(e)?;
        let series: [(&str, RGBColor, &Segments); 3] = [
            ("VmRSS", RGBColor(200, 30, 30), &rss),
            ("RssAnon", RGBColor(30, 60, 200), &anon),
            ("jemalloc allocated", RGBColor(20, 140, 60), &jemalloc),
        ];
        for (name, color, lines) in series {
            for (i, line) in lines.iter().enumerate() {
                let drawn = chart
                    .draw_series(LineSeries::new(line.iter().copied(), color.stroke_width(2)))
                    .map_err(e)?;
                if i == 0 {
                    drawn.label(name).legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
                }
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(e)?;
        root.present().map_err(e)?;
    }
    Ok(out)
}

//! Minimal SVG line charts (pure text): one chart, a few named series of (x, y) points,
//! linear axes with round ticks, a legend. Drawn by the calibration ([`crate::calibrate`],
//! shown by `lull calibrate` and the tray) and by the simulator's experiment reports.
//! Hand-written markup (a few KB per chart) rather than a plotting crate, so neither needs
//! more than lull-core's own dependencies.

use std::fmt::Write;

/// One line on a chart.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Points in x order.
    pub points: Vec<(f64, f64)>,
}

/// A line chart.
#[derive(Clone, Debug)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// X-axis label.
    pub x_label: String,
    /// Y-axis label.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
}

const COLOURS: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];
const W: f64 = 640.0;
const H: f64 = 400.0;
const L: f64 = 70.0;
const R: f64 = 150.0;
const T: f64 = 40.0;
const B: f64 = 50.0;

/// A "nice" tick step (1, 2 or 5 × 10^k) giving about `n` ticks over `span`.
fn tick_step(span: f64, n: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / n;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f < 1.5 {
        1.0
    } else if f < 3.5 {
        2.0
    } else if f < 7.5 {
        5.0
    } else {
        10.0
    };
    m * mag
}

fn fmt_tick(v: f64) -> String {
    if v.abs() >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v.fract().abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}").trim_end_matches('0').to_string()
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

impl Chart {
    /// A chart with no series yet.
    pub fn new(title: impl Into<String>, x_label: impl Into<String>, y_label: impl Into<String>) -> Chart {
        Chart { title: title.into(), x_label: x_label.into(), y_label: y_label.into(), series: Vec::new() }
    }

    /// Adds a series.
    pub fn line(mut self, label: impl Into<String>, points: Vec<(f64, f64)>) -> Chart {
        self.series.push(Series { label: label.into(), points });
        self
    }

    /// The chart as a standalone SVG document. The y axis starts at 0.
    pub fn to_svg(&self) -> String {
        let pts = self.series.iter().flat_map(|s| s.points.iter()).filter(|(x, y)| x.is_finite() && y.is_finite());
        let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
        for &(x, y) in pts {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y1 = y1.max(y);
        }
        if !x0.is_finite() {
            (x0, x1) = (0.0, 1.0);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        let ys = tick_step(y1.max(1e-9), 5.0);
        let y1 = (y1 / ys).ceil().max(1.0) * ys;
        let xs = tick_step(x1 - x0, 6.0);
        let (pw, ph) = (W - L - R, H - T - B);
        let px = |x: f64| L + (x - x0) / (x1 - x0) * pw;
        let py = |y: f64| T + ph - y / y1 * ph;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        let _ = writeln!(s, r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#, L + pw / 2.0, esc(&self.title));
        // Grid and ticks.
        let mut y = 0.0;
        while y <= y1 + ys * 1e-6 {
            let yy = py(y);
            let _ = writeln!(s, r##"<line x1="{L}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/>"##, L + pw);
            let _ = writeln!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#, L - 6.0, yy + 4.0, fmt_tick(y));
            y += ys;
        }
        let mut x = (x0 / xs).ceil() * xs;
        while x <= x1 + xs * 1e-6 {
            let xx = px(x);
            let _ = writeln!(s, r##"<line x1="{xx:.1}" y1="{T}" x2="{xx:.1}" y2="{:.1}" stroke="#eee"/>"##, T + ph);
            let _ = writeln!(s, r#"<text x="{xx:.1}" y="{:.1}" text-anchor="middle">{}</text>"#, T + ph + 16.0, fmt_tick(x));
            x += xs;
        }
        let _ = writeln!(s, r#"<rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#);
        let _ = writeln!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#, L + pw / 2.0, H - 12.0, esc(&self.x_label));
        let _ = writeln!(
            s,
            r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
            T + ph / 2.0,
            T + ph / 2.0,
            esc(&self.y_label)
        );
        for (i, se) in self.series.iter().enumerate() {
            let c = COLOURS[i % COLOURS.len()];
            let path: Vec<String> = se
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            let _ = writeln!(s, r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#, path.join(" "));
            for p in &path {
                let (a, b) = p.split_once(',').unwrap_or(("0", "0"));
                let _ = writeln!(s, r#"<circle cx="{a}" cy="{b}" r="2.5" fill="{c}"/>"#);
            }
            let ly = T + 10.0 + 18.0 * i as f64;
            let _ = writeln!(
                s,
                r#"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{c}" stroke-width="2"/>"#,
                W - R + 12.0,
                W - R + 32.0
            );
            let _ = writeln!(s, r#"<text x="{:.1}" y="{:.1}">{}</text>"#, W - R + 36.0, ly + 4.0, esc(&se.label));
        }
        s.push_str("</svg>\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(100.0, 5.0), 20.0);
        assert_eq!(tick_step(7.0, 6.0), 1.0);
        assert_eq!(tick_step(0.0, 5.0), 1.0);
    }

    #[test]
    fn svg_has_one_polyline_per_series_and_escapes_labels() {
        let svg = Chart::new("a < b", "x", "y").line("fifo", vec![(0.0, 1.0), (1.0, 2.0)]).line("p&q", vec![(0.0, 3.0)]).to_svg();
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a &lt; b") && svg.contains("p&amp;q"));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }
}

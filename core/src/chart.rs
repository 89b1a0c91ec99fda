//! Minimal SVG line charts (pure text): one chart, a few named series of (x, y) points,
//! linear axes with round ticks, a legend. Drawn by the calibration ([`crate::calibrate`],
//! shown by `lull calibrate` and the tray) and by the simulator's experiment reports.
//! Hand-written markup (a few KB per chart) rather than a plotting crate, so neither needs
//! more than lull-core's own dependencies.
//!
//! Nothing is clipped: the layout measures every text with `text_width`, a conservative
//! estimate (DejaVu Sans's advance widths, the widest of the usual sans-serif fonts,
//! rounded up), wraps a title or axis label that would not fit onto more lines, and widens
//! the chart for a long legend.

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
/// The narrowest chart; a long legend widens it, up to [`LEGEND_MAX`].
const MIN_W: f64 = 640.0;
/// The widest legend label line; a longer label wraps.
const LEGEND_MAX: f64 = 200.0;
/// The plot area's least width and its height.
const PLOT_W: f64 = 420.0;
const PLOT_H: f64 = 310.0;
/// Margin kept clear at every edge.
const PAD: f64 = 8.0;
const FONT: f64 = 12.0;
const TITLE_FONT: f64 = 14.0;
/// Line spacing, in font sizes.
const LEADING: f64 = 1.25;
/// A glyph's extent above and below the baseline, in font sizes (DejaVu Sans: 0.928, 0.236).
pub(crate) const ASCENT: f64 = 0.93;
pub(crate) const DESCENT: f64 = 0.24;

/// The width of one character in font sizes: DejaVu Sans's advance (the default
/// sans-serif on Linux and wider than Arial, Helvetica or Liberation Sans) rounded up to
/// its class, and a full em for anything not listed.
fn char_em(c: char) -> f64 {
    match c {
        ' ' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | '/' | '\\' | 'i' | 'j' | 'l' | 'I' | 'J' | '·' => 0.41,
        'f' | 'r' | 't' | '(' | ')' | '[' | ']' | '-' | '"' => 0.47,
        '*' | '_' | '`' | '?' | '–' | '°' => 0.54,
        'm' | 'w' | 'M' | 'W' | '@' | '%' => 1.0,
        'a'..='z' | '0'..='9' | '$' | '{' | '}' | 'é' | 'σ' | 'µ' => 0.64,
        'A'..='Z' | '&' => 0.79,
        '#' | '+' | '<' | '=' | '>' | '^' | '~' | '≥' | '≤' | '×' | '±' | '≈' | '→' => 0.84,
        _ => 1.0,
    }
}

/// The width of `s` drawn at `size` px, never less than its width in DejaVu Sans.
pub(crate) fn text_width(s: &str, size: f64) -> f64 {
    s.chars().map(char_em).sum::<f64>() * size
}

/// `s` broken at spaces into lines no wider than `max` px at `size` (a word wider than
/// that is broken between characters).
fn wrap(s: &str, size: f64, max: f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in s.split(' ') {
        let joined = if line.is_empty() { word.to_string() } else { format!("{line} {word}") };
        if text_width(&joined, size) <= max {
            line = joined;
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        for c in word.chars() {
            if !line.is_empty() && text_width(&line, size) + char_em(c) * size > max {
                lines.push(std::mem::take(&mut line));
            }
            line.push(c);
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

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

/// The values shown on an axis: from `lo` to `hi` in steps of `step`.
fn ticks(lo: f64, hi: f64, step: f64) -> Vec<f64> {
    let mut v = Vec::new();
    let mut x = (lo / step).ceil() * step;
    while x <= hi + step * 1e-6 {
        v.push(x);
        x += step;
    }
    v
}

/// Where everything goes: sizes from the texts, so none is clipped.
struct Layout {
    w: f64,
    h: f64,
    /// The plot area's left and top edges, width and height.
    l: f64,
    t: f64,
    pw: f64,
    ph: f64,
    title: Vec<String>,
    x_label: Vec<String>,
    y_label: Vec<String>,
    /// Each series' legend label, in lines, and the baseline of its first line.
    legend: Vec<(Vec<String>, f64)>,
}

impl Layout {
    fn new(c: &Chart, y_ticks: &[f64]) -> Layout {
        let y_label = wrap(&c.y_label, FONT, PLOT_H);
        let tick_w = y_ticks.iter().map(|v| text_width(&fmt_tick(*v), FONT)).fold(0.0, f64::max);
        let l = (PAD + y_label.len() as f64 * FONT * LEADING + 6.0 + tick_w + 6.0).ceil();
        let labels: Vec<Vec<String>> = c.series.iter().map(|s| wrap(&s.label, FONT, LEGEND_MAX)).collect();
        let legend_w = labels.iter().flatten().map(|l| text_width(l, FONT)).fold(0.0, f64::max);
        // Room for the legend (12 + 20-px swatch + 4 + label), and half the last x tick.
        let r = (12.0 + 20.0 + 4.0 + legend_w + PAD).max(40.0).ceil();
        let w = MIN_W.max(l + PLOT_W + r).ceil();
        let title = wrap(&c.title, TITLE_FONT, w - 2.0 * PAD);
        let x_label = wrap(&c.x_label, FONT, w - 2.0 * PAD);
        let t = PAD + title.len() as f64 * TITLE_FONT * LEADING + 14.5;
        // Tick labels, then the x label's lines, then the margin.
        let h = t + PLOT_H + 38.0 + (x_label.len() - 1) as f64 * FONT * LEADING + FONT * DESCENT + PAD;
        // Entries 18 px apart, a wrapped one's lines 15 px apart.
        let mut legend = Vec::new();
        let mut y = t + 14.0;
        for lines in labels {
            let next = y + 18.0 + (lines.len() - 1) as f64 * FONT * LEADING;
            legend.push((lines, y));
            y = next;
        }
        // A legend longer than the plot is tall.
        let h = h.max(y - 18.0 + FONT * DESCENT + PAD);
        Layout { w, h: h.ceil(), l, t, pw: w - l - r, ph: PLOT_H, title, x_label, y_label, legend }
    }

    /// The x at which a centred text of width `tw` sits nearest `want` and still fits.
    fn centre(&self, want: f64, tw: f64) -> f64 {
        want.min(self.w - PAD - tw / 2.0).max(PAD + tw / 2.0)
    }
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

    /// The x range and the top of the y axis (which starts at 0), with their tick steps.
    fn ranges(&self) -> (f64, f64, f64, f64, f64) {
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
        (x0, x1, tick_step(x1 - x0, 6.0), y1, ys)
    }

    /// The chart as a standalone SVG document. The y axis starts at 0.
    pub fn to_svg(&self) -> String {
        let (x0, x1, xs, y1, ys) = self.ranges();
        let y_ticks = ticks(0.0, y1, ys);
        let lay = Layout::new(self, &y_ticks);
        let (l, t, pw, ph, w, h) = (lay.l, lay.t, lay.pw, lay.ph, lay.w, lay.h);
        let px = |x: f64| l + (x - x0) / (x1 - x0) * pw;
        let py = |y: f64| t + ph - y / y1 * ph;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="{FONT}">"#
        );
        let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
        for (k, line) in lay.title.iter().enumerate() {
            let x = lay.centre(l + pw / 2.0, text_width(line, TITLE_FONT));
            let y = PAD + TITLE_FONT + k as f64 * TITLE_FONT * LEADING;
            let _ = writeln!(s, r#"<text x="{x:.1}" y="{y:.1}" text-anchor="middle" font-size="{TITLE_FONT}">{}</text>"#, esc(line));
        }
        for &y in &y_ticks {
            let yy = py(y);
            let _ = writeln!(s, r##"<line x1="{l}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/>"##, l + pw);
            let _ = writeln!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#, l - 6.0, yy + 4.0, fmt_tick(y));
        }
        for x in ticks(x0, x1, xs) {
            let xx = px(x);
            let _ = writeln!(s, r##"<line x1="{xx:.1}" y1="{t}" x2="{xx:.1}" y2="{:.1}" stroke="#eee"/>"##, t + ph);
            let _ = writeln!(s, r#"<text x="{xx:.1}" y="{:.1}" text-anchor="middle">{}</text>"#, t + ph + 16.0, fmt_tick(x));
        }
        let _ = writeln!(s, r#"<rect x="{l}" y="{t}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#);
        for (k, line) in lay.x_label.iter().enumerate() {
            let x = lay.centre(l + pw / 2.0, text_width(line, FONT));
            let y = t + ph + 38.0 + k as f64 * FONT * LEADING;
            let _ = writeln!(s, r#"<text x="{x:.1}" y="{y:.1}" text-anchor="middle">{}</text>"#, esc(line));
        }
        // Rotated a quarter turn: each line's glyphs extend left of its baseline by the ascent.
        let mid = t + ph / 2.0;
        for (k, line) in lay.y_label.iter().enumerate() {
            let x = PAD + FONT * ASCENT + k as f64 * FONT * LEADING;
            let _ = writeln!(
                s,
                r#"<text x="{x:.1}" y="{mid:.1}" text-anchor="middle" transform="rotate(-90 {x:.1} {mid:.1})">{}</text>"#,
                esc(line)
            );
        }
        for (i, (se, (lines, y))) in self.series.iter().zip(&lay.legend).enumerate() {
            draw_series(&mut s, i, se, (&px, &py), (l + pw + 12.0, *y), lines);
        }
        s.push_str("</svg>\n");
        s
    }
}

/// Data-to-pixel maps for x and y.
type ToPx<'a> = (&'a dyn Fn(f64) -> f64, &'a dyn Fn(f64) -> f64);

/// Series `i`'s line, points and legend entry: its swatch at `(legend_x, ly + 4)` is the
/// left end of a first label line's baseline `ly`, then the `label`'s lines.
fn draw_series(s: &mut String, i: usize, se: &Series, (px, py): ToPx, (legend_x, ly): (f64, f64), label: &[String]) {
    let c = COLOURS[i % COLOURS.len()];
    let path: Vec<(f64, f64)> = se.points.iter().filter(|(x, y)| x.is_finite() && y.is_finite()).map(|&(x, y)| (px(x), py(y))).collect();
    let pts: Vec<String> = path.iter().map(|(a, b)| format!("{a:.1},{b:.1}")).collect();
    let _ = writeln!(s, r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#, pts.join(" "));
    for (a, b) in &path {
        let _ = writeln!(s, r#"<circle cx="{a:.1}" cy="{b:.1}" r="2.5" fill="{c}"/>"#);
    }
    let sy = ly - 4.0;
    let _ =
        writeln!(s, r#"<line x1="{legend_x:.1}" y1="{sy:.1}" x2="{:.1}" y2="{sy:.1}" stroke="{c}" stroke-width="2"/>"#, legend_x + 20.0);
    for (k, line) in label.iter().enumerate() {
        let _ = writeln!(s, r#"<text x="{:.1}" y="{:.1}">{}</text>"#, legend_x + 24.0, ly + k as f64 * FONT * LEADING, esc(line));
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

    /// Widths in DejaVu Sans (em), summed from the font's advance widths
    /// (`/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf`, hmtx table).
    #[test]
    fn text_width_is_never_narrower_than_dejavu_sans() {
        for (s, dejavu) in [
            ("The quick brown fox jumps over the lazy dog", 22.549),
            ("MWmw@% WAVE", 8.901),
            ("Slowdown vs recruitment threshold, mean of seeds (cf. seed 004 Fig. 7)", 36.052),
            ("0123456789 ≥ — –", 9.652),
        ] {
            let ours = text_width(s, 1.0);
            assert!(ours >= dejavu && ours <= dejavu * 1.25, "{s}: {ours} em against DejaVu Sans's {dejavu}");
        }
    }

    /// An attribute's value in a tag.
    fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
        let from = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(&tag[from..from + tag[from..].find('"')?])
    }

    /// Every `<text>`'s box (x0, y0, x1, y1) as drawn: its measured width placed by its
    /// anchor, ascent above and descent below the baseline, turned when rotated.
    fn text_boxes(svg: &str) -> Vec<(String, [f64; 4])> {
        let mut out = Vec::new();
        for part in svg.split("<text").skip(1) {
            let (tag, rest) = part.split_once('>').unwrap();
            let text = rest.split("</text>").next().unwrap().replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
            let num = |n: &str| attr(tag, n).map(|v| v.parse::<f64>().unwrap());
            let (x, y, size) = (num("x").unwrap(), num("y").unwrap(), num("font-size").unwrap_or(FONT));
            let w = text_width(&text, size);
            let (lo, hi) = match attr(tag, "text-anchor") {
                Some("middle") => (-w / 2.0, w / 2.0),
                Some("end") => (-w, 0.0),
                _ => (0.0, w),
            };
            let b = if attr(tag, "transform").is_some_and(|t| t.starts_with("rotate(-90")) {
                [x - size * ASCENT, y - hi, x + size * DESCENT, y - lo]
            } else {
                [x + lo, y - size * ASCENT, x + hi, y + size * DESCENT]
            };
            out.push((text, b));
        }
        out
    }

    fn view_box(svg: &str) -> (f64, f64) {
        let v: Vec<f64> = attr(svg, "viewBox").unwrap().split(' ').map(|x| x.parse().unwrap()).collect();
        (v[2], v[3])
    }

    #[test]
    fn long_titles_labels_and_legends_lie_inside_the_view_box() {
        let long = "Fig. 2, online regime — sequential jobs with t_s = 10–500 s (ours) — maximum waiting time (mean of 10 seeds)";
        let charts = [
            Chart::new(long, "T_c,max (s)", "maximum waiting time (s)").line("FIFO", vec![(0.0, 2500.0), (10_000.0, 0.0)]),
            Chart::new("Keyboard and mouse activity by hour (cf. seed 004 Fig. 1)", "hour of day", "% of all activity")
                .line("shape given (Fig. 1 reading)", vec![(0.0, 3.0), (23.0, 2.5)])
                .line("generated (mean of seeds)", vec![(0.0, 2.9), (23.0, 2.7)]),
            Chart::new(
                "W",
                format!("{long}, as an x label"),
                "a y label long enough that it cannot run along the plot's height in one line, not even close",
            )
            .line(long, vec![(1.0, 123_456.0)]),
            Chart::new("Supercalifragilisticexpialidocious".repeat(4), "x", "y"),
        ];
        for c in &charts {
            let svg = c.to_svg();
            let (w, h) = view_box(&svg);
            for (text, [x0, y0, x1, y1]) in text_boxes(&svg) {
                assert!(
                    x0 >= 0.0 && y0 >= 0.0 && x1 <= w && y1 <= h,
                    "{text:?} at [{x0:.0}, {y0:.0}, {x1:.0}, {y1:.0}] outside 0 0 {w} {h}"
                );
            }
        }
    }

    #[test]
    fn wrapping_keeps_every_word_and_each_line_fits() {
        let s = "one two three four five six seven eight nine ten eleven twelve";
        let lines = wrap(s, 12.0, 100.0);
        assert!(lines.len() > 1);
        assert_eq!(lines.join(" "), s);
        assert!(lines.iter().all(|l| text_width(l, 12.0) <= 100.0), "{lines:?}");
        assert_eq!(wrap("", 12.0, 100.0), vec![String::new()]);
        assert_eq!(wrap("abcdefghijklmnopqrstuvwxyz", 12.0, 50.0).concat(), "abcdefghijklmnopqrstuvwxyz");
    }
}

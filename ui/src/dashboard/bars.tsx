// Stacked bar chart (uPlot, as the tray's status window): one bar per period, one colour
// per series, stacked; an optional line (e.g. the interruption limit) on top. x is the
// period's index, labelled with the period's name, so no time zone moves a bar.
import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

export interface Series {
  label: string;
  colour: string;
  values: (number | null)[];
}

export function StackedBars(props: { labels: string[]; series: Series[]; unit: string; line?: Series; height?: number; name: string; whole?: boolean }) {
  const el = useRef<HTMLDivElement>(null);
  const { labels, series, unit, line, height = 220, name, whole = false } = props;
  useEffect(() => {
    if (!el.current) return;
    const xs = labels.map((_, i) => i);
    // Cumulative sums, drawn tallest first so each series shows as its own band.
    const stacked: number[][] = [];
    let acc = labels.map(() => 0);
    for (const s of series) {
      acc = acc.map((a, i) => a + (s.values[i] ?? 0));
      stacked.push(acc);
    }
    // An empty chart (nothing in any period) still gets a readable axis: 0 to 1.
    const peak = Math.max(0, ...acc, ...(line?.values ?? []).map((v) => v ?? 0));
    const top = peak > 0 ? peak : 1 / 1.12;
    const order = series.map((_, i) => i).reverse();
    const bars = uPlot.paths.bars!({ size: [0.7, 64] });
    const opts: uPlot.Options = {
      width: el.current.clientWidth || 700,
      height,
      legend: { show: false },
      cursor: { show: false },
      scales: { x: { time: false, range: [-0.5, labels.length - 0.5] }, y: { range: [0, top * 1.12] } },
      axes: [
        { splits: () => xs, values: (_u, ticks) => ticks.map((t) => labels[t] ?? ""), grid: { show: false } },
        { label: unit, size: 56, ...(whole ? { incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] } : {}), values: (_u, ticks) => ticks.map((t) => (t < 10 ? +t.toFixed(2) : +t.toFixed(0)).toString()) },
      ],
      series: [
        {},
        ...order.map((i) => ({ label: series[i].label, fill: series[i].colour, stroke: series[i].colour, paths: bars, points: { show: false } })),
        ...(line ? [{ label: line.label, stroke: line.colour, width: 2, dash: [6, 4], points: { show: true, size: 6, fill: line.colour } }] : []),
      ],
    };
    // A series with nothing in a period draws no bar there (uPlot would draw a flat line
    // for a zero); a line value of null leaves a gap (nothing reported that period).
    const bands = order.map((i) => stacked[i].map((v, j) => ((series[i].values[j] ?? 0) > 0 ? v : null)));
    const data = [xs, ...bands, ...(line ? [line.values.map((v) => v ?? null)] : [])] as uPlot.AlignedData;
    const plot = new uPlot(opts, data, el.current);
    const resize = () => el.current && plot.setSize({ width: el.current.clientWidth, height });
    addEventListener("resize", resize);
    return () => {
      removeEventListener("resize", resize);
      plot.destroy();
    };
  }, [JSON.stringify([labels, series, line, unit, whole])]);
  return (
    <div>
      <div ref={el} class="chart" data-chart={name} role="img" aria-label={name} />
      <ul class="legend">
        {series.map((s) => (
          <li>
            <i style={{ background: s.colour }} />
            {s.label}
          </li>
        ))}
        {line && (
          <li>
            <i class="line" style={{ borderColor: line.colour }} />
            {line.label}
          </li>
        )}
      </ul>
    </div>
  );
}

/** Distinct colours for up to 10 series; more wrap around. */
export const PALETTE = ["#1f9d55", "#2d6cdf", "#e08a00", "#8e44ad", "#d43a3a", "#16a2b8", "#7a8b00", "#c2185b", "#5d4037", "#546e7a"];

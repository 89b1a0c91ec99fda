// Donated time per day as a bar chart, drawn with uPlot (≈ 50 kB, canvas, no deps).
import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import type { DayDonation } from "./bindings";

export function DonatedChart({ days }: { days: DayDonation[] }) {
  const el = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!el.current) return;
    const xs = days.map((d) => {
      const [y, m, dd] = d.day.split("-").map(Number);
      return new Date(y, m - 1, dd).getTime() / 1000;
    });
    const hours = days.map((d) => d.cpu_s / 3600);
    const max = Math.max(1, ...hours);
    const plot = new uPlot(
      {
        width: el.current.clientWidth || 600,
        height: 150,
        legend: { show: false },
        cursor: { show: false },
        scales: { x: { time: true, range: (_u, lo, hi) => [lo - 43_200, hi + 43_200] }, y: { range: [0, max * 1.15] } },
        axes: [
          { values: (_u, ticks) => ticks.map((t) => new Date(t * 1000).toLocaleDateString([], { weekday: "short", day: "numeric" })), splits: () => xs },
          { label: "hours", size: 50, values: (_u, ticks) => ticks.map((t) => (t < 10 ? t.toFixed(1) : t.toFixed(0))) },
        ],
        series: [{}, { label: "donated CPU (h)", fill: "#1f9d55", stroke: "#1f9d55", paths: uPlot.paths.bars!({ size: [0.6, 48] }), points: { show: false } }],
      },
      [xs, hours],
      el.current,
    );
    return () => plot.destroy();
  }, [days]);
  return <div ref={el} class="chart" />;
}

// Donated time per owner or per machine, per day or week: a stacked bar chart, a
// period-by-period table, the report's full rows, and "Export CSV", which downloads the
// API's own CSV for the same query (not a re-encoding of the table).
import { useState } from "preact/hooks";
import * as api from "./api";
import { PALETTE, StackedBars } from "./bars";
import { Empty, Loading, useLoad } from "./common";
import { dayLabel, daysBetween, duration, todayUtc } from "./format";

export const RANGES = [
  { since: "7d", label: "Last 7 days" },
  { since: "14d", label: "Last 14 days" },
  { since: "30d", label: "Last 30 days" },
  { since: "12w", label: "Last 12 weeks" },
];

/** The x axis: every period from the report's first day to today (or the last row). */
export function periods(r: api.Report): string[] {
  const last = r.rows.reduce((m, x) => (x.period > m ? x.period : m), todayUtc());
  if (r.period === "week") {
    const [y, m, d] = r.since.split("-").map(Number);
    const t = new Date(Date.UTC(y, m - 1, d));
    t.setUTCDate(t.getUTCDate() - ((t.getUTCDay() + 6) % 7));
    return daysBetween(t.toISOString().slice(0, 10), last, 7);
  }
  return daysBetween(r.since, last);
}

/** A chart scale for seconds: the unit that keeps the tallest bar readable. */
export function unitFor(maxSecs: number): { unit: string; div: number } {
  if (maxSecs >= 7200) return { unit: "CPU hours", div: 3600 };
  if (maxSecs >= 120) return { unit: "CPU minutes", div: 60 };
  return { unit: "CPU seconds", div: 1 };
}

export function keyName(row: api.ReportRow, owners: Map<string, string>): string {
  return row.machine === null ? row.key : `${row.machine} (${owners.get(row.key) ?? "?"})`;
}

export function Donated({ tick }: { tick: number }) {
  const [q, setQ] = useState<api.ReportQuery>({ by: "owner", since: "7d", period: "day" });
  const [exporting, setExporting] = useState<string | null>(null);
  const load = useLoad(() => Promise.all([api.report(q), api.agents()]), [tick, q.by, q.since, q.period]);
  const exportCsv = async () => {
    setExporting("Exporting…");
    try {
      const csv = await api.reportCsv(q);
      const a = document.createElement("a");
      a.href = URL.createObjectURL(new Blob([csv], { type: "text/csv" }));
      a.download = `lull-donated-by-${q.by}-${q.period}-${q.since}.csv`;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setExporting(null);
    } catch (e) {
      setExporting(`Export failed: ${e}`);
    }
  };
  return (
    <>
      <div class="controls">
        <label>
          Per{" "}
          <select data-testid="by" value={q.by} onChange={(e) => setQ({ ...q, by: (e.target as HTMLSelectElement).value as api.ReportQuery["by"] })}>
            <option value="owner">owner</option>
            <option value="machine">machine</option>
          </select>
        </label>
        <label>
          and{" "}
          <select data-testid="period" value={q.period} onChange={(e) => setQ({ ...q, period: (e.target as HTMLSelectElement).value as api.ReportQuery["period"] })}>
            <option value="day">day</option>
            <option value="week">week</option>
          </select>
        </label>
        <label>
          over the{" "}
          <select data-testid="since" value={q.since} onChange={(e) => setQ({ ...q, since: (e.target as HTMLSelectElement).value })}>
            {RANGES.map((r) => (
              <option value={r.since}>{r.label.toLowerCase()}</option>
            ))}
          </select>
        </label>
        <button class="primary" data-testid="export-csv" onClick={exportCsv}>
          Export CSV
        </button>
        {exporting && <span class="muted">{exporting}</span>}
      </div>
      <Loading load={load}>
        {([r, agents]) => {
          const owners = new Map(agents.map((a) => [a.id, a.owner]));
          const xs = periods(r);
          const keys = [...new Set(r.rows.map((x) => x.key))];
          const name = new Map(r.rows.map((x) => [x.key, keyName(x, owners)]));
          const cell = new Map(r.rows.map((x) => [`${x.key}|${x.period}`, x]));
          const totals = new Map(keys.map((k) => [k, r.rows.filter((x) => x.key === k).reduce((a, x) => a + x.cpu_s, 0)]));
          keys.sort((a, b) => (totals.get(b) ?? 0) - (totals.get(a) ?? 0));
          const perPeriod = xs.map((p) => r.rows.filter((x) => x.period === p).reduce((a, x) => a + x.cpu_s, 0));
          const { unit, div } = unitFor(Math.max(0, ...perPeriod));
          const label = (p: string) => (r.period === "week" ? `wk ${p.slice(5)}` : dayLabel(p));
          const what = q.by === "owner" ? "owner" : "machine";
          if (r.rows.length === 0)
            return (
              <Empty>
                No donated time since {r.since}. Machines report donated time once guest work has run on them; check the Overview for machines that
                are offline or never connected.
              </Empty>
            );
          return (
            <>
              <section>
                <h2>
                  Donated CPU time per {what}, per {r.period}
                </h2>
                <StackedBars
                  name="donated"
                  labels={xs.map(label)}
                  unit={unit}
                  series={keys.map((k, i) => ({ label: name.get(k) ?? k, colour: PALETTE[i % PALETTE.length], values: xs.map((p) => (cell.get(`${k}|${p}`)?.cpu_s ?? 0) / div) }))}
                />
              </section>
              <section>
                <h2>CPU time per {what}</h2>
                <div class="scroll">
                  <table data-testid="pivot">
                    <thead>
                      <tr>
                        <th>{what === "owner" ? "Owner" : "Machine (owner)"}</th>
                        {xs.map((p) => (
                          <th class="num">{label(p)}</th>
                        ))}
                        <th class="num">Total</th>
                      </tr>
                    </thead>
                    <tbody>
                      {keys.map((k) => (
                        <tr data-key={k}>
                          <td>{name.get(k)}</td>
                          {xs.map((p) => {
                            const c = cell.get(`${k}|${p}`);
                            return (
                              <td class="num" data-period={p} data-value={c?.cpu_s ?? 0}>
                                {c && c.cpu_s > 0 ? duration(c.cpu_s) : <span class="muted">–</span>}
                              </td>
                            );
                          })}
                          <td class="num total">{duration(totals.get(k) ?? 0)}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </div>
              </section>
              <section>
                <h2>Report rows (Export CSV downloads these, with every field)</h2>
                <table data-testid="report-rows">
                  <thead>
                    <tr>
                      <th>{what === "owner" ? "Owner" : "Machine (owner)"}</th>
                      <th>{r.period === "week" ? "Week of" : "Day"}</th>
                      <th class="num">CPU time</th>
                      <th class="num">Wall time</th>
                      <th class="num">Interruptions</th>
                      <th class="num" title="share of the period the machines were available for guest work, from their heartbeats">Time available</th>
                      <th class="num">Jobs completed</th>
                      <th class="num">Evictions</th>
                    </tr>
                  </thead>
                  <tbody>
                    {[...r.rows].sort((a, b) => (name.get(a.key) ?? "").localeCompare(name.get(b.key) ?? "") || a.period.localeCompare(b.period)).map((x) => (
                      <tr data-key={x.key} data-period={x.period}>
                        <td>{name.get(x.key)}</td>
                        <td>{x.period}</td>
                        <td class="num" data-field="cpu_s">
                          {duration(x.cpu_s)}
                        </td>
                        <td class="num" data-field="wall_s">
                          {duration(x.wall_s)}
                        </td>
                        <td class="num" data-field="interruptions">
                          {x.interruptions}
                          {x.interruption_limit > 0 ? ` of ${x.interruption_limit}` : ""}
                        </td>
                        <td class="num" data-field="available_fraction">
                          {(x.available_fraction * 100).toFixed(1)} %
                        </td>
                        <td class="num" data-field="jobs_completed">
                          {x.jobs_completed}
                        </td>
                        <td class="num" data-field="evictions">
                          {x.evictions}
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </section>
            </>
          );
        }}
      </Loading>
    </>
  );
}

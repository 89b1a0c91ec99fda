// How figures are written on the dashboard. Kept in one place: the browser test
// (ui/tests/dashboard.mjs) checks the tables against the API with its own copy of these
// rules.

/** CPU or wall time: "42.0 s", "12.5 min", "3.25 h". */
export function duration(secs: number): string {
  if (secs < 60) return `${secs.toFixed(1)} s`;
  if (secs < 3600) return `${(secs / 60).toFixed(1)} min`;
  return `${(secs / 3600).toFixed(2)} h`;
}

/** "3 min ago", "2 h ago", "5 d ago". */
export function ago(ms: number, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

/** Local date and time, "2026-11-23 01:14". */
export function when(ms: number): string {
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`;
}

/** "Mon 23" from "2026-11-23" (the day as the agents report it). */
export function dayLabel(day: string): string {
  const [y, m, d] = day.split("-").map(Number);
  return new Date(y, m - 1, d).toLocaleDateString("en-GB", { weekday: "short", day: "numeric" });
}

export function bytes(n: number): string {
  if (n >= 1 << 30) return `${(n / (1 << 30)).toFixed(1)} GiB`;
  return `${Math.round(n / (1 << 20))} MiB`;
}

/** The days from `first` to `last` inclusive (YYYY-MM-DD), `step` days apart. */
export function daysBetween(first: string, last: string, step = 1): string[] {
  const out: string[] = [];
  const [y, m, d] = first.split("-").map(Number);
  const t = new Date(Date.UTC(y, m - 1, d));
  for (let i = 0; i < 400; i++) {
    const s = t.toISOString().slice(0, 10);
    if (s > last) break;
    out.push(s);
    t.setUTCDate(t.getUTCDate() + step);
  }
  return out;
}

/** Today as YYYY-MM-DD in UTC (the coordinator's `since` counts UTC days). */
export const todayUtc = () => new Date().toISOString().slice(0, 10);

// The status window: what the machine is doing now, the tray menu's Donate now / Pause /
// Resume, today's timeline, the last 7 days of donated time, and today's interruptions
// with the memory-restore time of each. Without a tray icon it is the owner's only
// control, so it also offers Quit Lull (Esc only closes it; Lull keeps running).
import { getCurrentWindow } from "@tauri-apps/api/window";
import { useEffect, useState } from "preact/hooks";
import { DonatedChart } from "./chart";
import {
  AgentStatus,
  GROUPS,
  Group,
  OwnerActions,
  STATES,
  StateKind,
  TodayReport,
  act,
  fallback,
  human,
  openWindow,
  ownerActions,
  quitLull,
  status,
  today,
} from "./api";

const DAY_MS = 86_400_000;

/** Local midnight of a `YYYY-MM-DD` day. */
function dayStart(day: string): number {
  const [y, m, d] = day.split("-").map(Number);
  return new Date(y, m - 1, d).getTime();
}

export interface Segment {
  start: number;
  end: number;
  group: Group;
}

/**
 * Today's transitions as coloured spans up to now. Only what the ledger knows is drawn:
 * the agent records the state it starts in as a transition (from and to that state), so
 * the time from its start is drawn; before the first row of the day (or before the current
 * state began, when there is none) Lull was not running or the state came from yesterday,
 * so that stays blank.
 */
export function segments(report: TodayReport, current: StateKind, stateForS: number, now: number): Segment[] {
  const start = dayStart(report.day);
  const end = Math.min(now, start + DAY_MS);
  const clamp = (t: number) => Math.max(start, Math.min(end, t));
  const rows = report.timeline;
  const out: Segment[] = [];
  if (rows.length === 0) {
    const since = clamp(now - stateForS * 1000);
    if (end > since) out.push({ start: since, end, group: STATES[current]?.group ?? "idle" });
    return out;
  }
  let t = clamp(new Date(rows[0].at_utc).getTime());
  let state = rows[0].to as StateKind;
  for (const r of rows.slice(1)) {
    const at = clamp(new Date(r.at_utc).getTime());
    if (at > t) out.push({ start: t, end: at, group: STATES[state]?.group ?? "idle" });
    t = Math.max(t, at);
    state = r.to as StateKind;
  }
  if (end > t) out.push({ start: t, end, group: STATES[state]?.group ?? "idle" });
  return out;
}

function Timeline({ report, current, stateForS }: { report: TodayReport; current: StateKind; stateForS: number }) {
  const start = dayStart(report.day);
  const segs = segments(report, current, stateForS, Date.now());
  const pct = (t: number) => `${((t - start) / DAY_MS) * 100}%`;
  const totals = new Map<Group, number>();
  for (const s of segs) totals.set(s.group, (totals.get(s.group) ?? 0) + (s.end - s.start));
  return (
    <section>
      <h2>Today</h2>
      <div class="timeline" role="img" aria-label="today's timeline">
        {segs.map((s) => (
          <div class="seg" style={{ left: pct(s.start), width: pct(start + (s.end - s.start)), background: GROUPS[s.group].colour }} />
        ))}
      </div>
      <div class="ticks">
        {[0, 6, 12, 18, 24].map((h) => (
          <span style={{ left: `${(h / 24) * 100}%` }}>{String(h).padStart(2, "0")}:00</span>
        ))}
      </div>
      <ul class="legend">
        {(Object.keys(GROUPS) as Group[]).map((g) => (
          <li>
            <i style={{ background: GROUPS[g].colour }} />
            {GROUPS[g].label} <b>{human((totals.get(g) ?? 0) / 1000)}</b>
          </li>
        ))}
        <li>
          <i class="none" />
          no record (Lull not running)
        </li>
      </ul>
    </section>
  );
}

function Interruptions({ report, used, limit }: { report: TodayReport; used: number; limit: number }) {
  const rows = report.interruptions;
  // A count recovered after damage to the ledger has no rows of its own.
  const recovered = used - rows.length;
  return (
    <section>
      <h2>
        Interruptions today: {used} of {limit}
      </h2>
      {recovered > 0 && <p class="muted">{recovered} of them counted from what survived damage to the ledger: their details are not in this ledger.</p>}
      {rows.length === 0 ? (
        recovered > 0 ? null : <p class="muted">None today: guest work has not been in your way.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>#</th>
              <th>time</th>
              <th>why</th>
              <th>memory restored in</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr>
                <td>{r.number}</td>
                <td>{new Date(r.at_utc).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })}</td>
                <td>{r.cause.replace(/_/g, " ")}</td>
                <td class={(r.restore_ms ?? 0) + (r.cache_restore_ms ?? 0) > 1000 ? "slow" : ""}>
                  {restoreText(r.restore_ms, r.cache_restore_ms)}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** How guest work is kept apart from the owner: the containment (naming whatever guests
 * lack) and the owner's memory protection (the cgroups and amounts, or why none). */
function KeptApart({ s }: { s: AgentStatus }) {
  const c = s.containment;
  const m = s.owner_memory;
  if (!c && !m) return null;
  return (
    <section>
      <h2>How guest work is kept apart</h2>
      <dl class="facts">
        {c && (
          <>
            <dt>Guests</dt>
            <dd id="containment" class={c.missing.length > 0 ? "warn" : ""}>
              {c.summary}
              {c.placement && <span class="muted"> · {c.placement}</span>}
            </dd>
          </>
        )}
        {m && (
          <>
            <dt>Your memory</dt>
            <dd id="owner-memory">{m.protection}</dd>
          </>
        )}
      </dl>
    </section>
  );
}

/** The tray menu's actions: each button sends the menu item's control request. */
function Controls({ s, onStatus }: { s: AgentStatus; onStatus: (s: AgentStatus) => void }) {
  const [choices, setChoices] = useState<OwnerActions | null>(null);
  const [err, setErr] = useState<string | null>(null);
  useEffect(() => {
    ownerActions().then(setChoices, (e) => setErr(String(e)));
  }, []);
  if (!choices) return err ? <p class="err">{err}</p> : null;
  const run = (id: string) =>
    act(id).then(
      (st) => {
        onStatus(st);
        setErr(null);
      },
      (e) => setErr(`Not done: ${e}`),
    );
  // As in the tray menu: Resume ends a pause or an offer to donate now.
  const canResume = s.state === "paused" || s.donate_now;
  const row = (what: string, list: { id: string; label: string }[]) => (
    <div class="row">
      <span class="what">{what}</span>
      {list.map((c) => (
        <button type="button" id={c.id} onClick={() => void run(c.id)}>
          {c.label}
        </button>
      ))}
    </div>
  );
  return (
    <section class="owner-actions" aria-label="Donate now, pause or resume">
      {row("Donate now", choices.donate)}
      {row("Pause", choices.pause)}
      <div class="row">
        <span class="what" />
        <button type="button" id={choices.resume.id} disabled={!canResume} onClick={() => void run(choices.resume.id)}>
          {choices.resume.label}
        </button>
        <span class="muted">{canResume ? "ends the pause or the offer" : "nothing to resume"}</span>
      </div>
      {err && (
        <p class="err" role="alert">
          {err}
        </p>
      )}
    </section>
  );
}

/** Stops Lull (the window stands in for the tray menu's Quit). */
function QuitButton() {
  const [err, setErr] = useState<string | null>(null);
  return (
    <>
      <button id="quit" onClick={() => void quitLull().then(() => setErr(null), (e) => setErr(String(e)))}>
        Quit Lull
      </button>
      {err && (
        <span class="err" role="alert">
          {err}
        </span>
      )}
    </>
  );
}

function headline(s: AgentStatus): string {
  switch (s.state) {
    case "paused":
      return s.paused_for_s != null ? `Paused for another ${human(s.paused_for_s)}` : s.pause?.kind === "until_day" ? "Paused until tomorrow" : "Paused until you resume";
    case "donating":
      return s.donate_now ? (s.donate_for_s != null ? `Donating now, ${human(s.donate_for_s)} left` : "Donating until you return") : "Donating while you are away";
    case "idle":
      return `Idle for ${human(s.idle_for_s)}; guest work may start after ${human(s.recruitment_threshold_s)}`;
    case "owner_active":
      switch (s.busy) {
        case "owner_cpu":
          return `Busy: CPU ${Math.round(s.owner_cpu * 100)} % (not your input)`;
        case "owner_memory":
          return "Busy: memory use is growing (not your input)";
        case "inhibitor":
          return "You are present: a program holds an idle inhibitor";
        default:
          return STATES[s.state].label;
      }
    case "evicting":
      return `Stopping guest work (${s.reason})`;
    case "not_allowed":
      if (s.not_allowed === "exclusive_program" && s.exclusive_program) return `Not allowed while ${s.exclusive_program} runs`;
      return `Not allowed now (${(s.not_allowed ?? "rules").replace(/_/g, " ")})`;
    default:
      return STATES[s.state].label;
  }
}

/** The window title names what needs attention too (visible in the task bar, and to tests). */
function useAttentionTitle(s: AgentStatus | null) {
  const kinds = s ? s.alerts.map((a) => a.kind).join(", ") : "";
  useEffect(() => {
    if (s === null) return;
    void getCurrentWindow()
      .setTitle(kinds ? `Lull: attention (${kinds})` : "Lull")
      .catch(() => {});
  }, [kinds, s === null]);
}

export function StatusView() {
  const [s, setS] = useState<AgentStatus | null>(null);
  const [r, setR] = useState<TodayReport | null>(null);
  const [err, setErr] = useState<string | null>(null);
  const [why, setWhy] = useState<string | null>(null);
  useAttentionTitle(s);
  useEffect(() => {
    fallback().then(setWhy, () => setWhy(null));
  }, []);
  useEffect(() => {
    const load = () =>
      Promise.all([status(), today()])
        .then(([a, b]) => {
          setS(a);
          setR(b);
          setErr(null);
        })
        .catch((e) => setErr(String(e)));
    void load();
    const t = setInterval(load, 5000);
    return () => clearInterval(t);
  }, []);
  if (err) return <main class="error">Cannot reach the Lull agent: {err}</main>;
  if (!s || !r) return <main class="muted">Loading…</main>;
  return (
    <main>
      {why && <p class="banner warn">No tray icon: {why}</p>}
      {s.alerts.map((a) => (
        <p class="banner bad alert" role="alert" data-kind={a.kind}>
          {a.message}
          {a.action && <span class="action"> What to do: {a.action}</span>}
        </p>
      ))}
      <header class="head">
        <span class="dot" style={{ background: STATES[s.state].colour }} />
        <div>
          <h1 id="headline">{headline(s)}</h1>
          <p>
            Today: donated <b>{human(s.donated_cpu_s_today)}</b> of CPU ({human(s.donated_wall_s_today)} wall) · interruptions{" "}
            <b>
              {s.interruptions_today} of {s.interruption_limit}
            </b>
          </p>
        </div>
      </header>
      <Controls s={s} onStatus={setS} />
      <Timeline report={r} current={s.state} stateForS={s.state_for_s} />
      <section>
        <h2>Donated CPU time, last 7 days</h2>
        <DonatedChart days={r.donated_days} />
        <p class="muted">
          This week: <b>{human(r.donated_days.reduce((a, d) => a + d.cpu_s, 0))}</b> of CPU given to the pool
          {r.donated_days.every((d) => d.cpu_s === 0) ? " (nothing yet: guest work runs when your machine is idle)" : ""}.
        </p>
      </section>
      <Interruptions report={r} used={s.interruptions_today} limit={s.interruption_limit} />
      <KeptApart s={s} />
      <footer>
        <button onClick={() => void openWindow("settings")}>Settings…</button>
        {why && <QuitButton />}
        <span class="muted">
          {why
            ? "Esc closes this window; Lull keeps running. Start Lull again to bring it back, or Quit Lull to stop it."
            : "Esc closes this window; Lull keeps running in the tray."}
        </span>
      </footer>
    </main>
  );
}

/** The restore after an eviction: swapped pages, then the file cache, each when measured. */
function restoreText(swapMs: number | null, cacheMs: number | null): string {
  const parts: string[] = [];
  if (swapMs != null) parts.push(`swap ${(swapMs / 1000).toFixed(2)} s`);
  if (cacheMs != null) parts.push(`file cache ${(cacheMs / 1000).toFixed(2)} s`);
  return parts.length === 0 ? "not measured" : parts.join(" · ");
}

// Pieces every dashboard page uses: loading data with errors and empty states shown in
// words, and the names and colours of machine and job states.
import { useEffect, useState } from "preact/hooks";
import type { ComponentChildren } from "preact";
import { ApiError } from "./api";

export type Load<T> = { data?: T; error?: string };

/** Runs `f` when `deps` change (and when `tick` moves, i.e. on Refresh). */
export function useLoad<T>(f: () => Promise<T>, deps: unknown[]): Load<T> {
  const [s, set] = useState<Load<T>>({});
  useEffect(() => {
    let live = true;
    f().then(
      (data) => live && set({ data }),
      (e) => live && set({ error: e instanceof ApiError ? `${e.message} (HTTP ${e.status})` : String(e) }),
    );
    return () => {
      live = false;
    };
  }, deps);
  return s;
}

export function Loading<T>({ load, children }: { load: Load<T>; children: (data: T) => ComponentChildren }) {
  if (load.error) return <p class="banner bad">Could not load: {load.error}</p>;
  if (load.data === undefined) return <p class="muted">Loading…</p>;
  return <>{children(load.data)}</>;
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="empty">{children}</div>;
}

/** Machine states as the agents report them, plus the coordinator's offline / never_seen. */
export const MACHINE_STATES: Record<string, { label: string; colour: string }> = {
  donating: { label: "Donating", colour: "#1f9d55" },
  lingering: { label: "Donating, owner lightly active", colour: "#6cc48f" },
  lending_light: { label: "Lending, owner working lightly", colour: "#6cc48f" },
  recruitable: { label: "Idle, ready for work", colour: "#9ad0b0" },
  idle: { label: "Idle, not yet recruited", colour: "#b9bec7" },
  owner_active: { label: "Owner using it", colour: "#2d6cdf" },
  evicting: { label: "Stopping guest work", colour: "#7aa5f0" },
  paused: { label: "Paused by owner", colour: "#e08a00" },
  out_of_budget: { label: "Out of interruptions today", colour: "#d43a3a" },
  not_allowed: { label: "Not allowed now (hours, battery, heat)", colour: "#4b5058" },
  offline: { label: "Offline (no heartbeat)", colour: "#1d2430" },
  never_seen: { label: "Enrolled, never connected", colour: "#d5d9df" },
};
export const machineState = (s: string) => MACHINE_STATES[s] ?? { label: s, colour: "#9aa0a6" };

export const JOB_STATES: Record<string, { label: string; colour: string }> = {
  queued: { label: "Queued", colour: "#e08a00" },
  running: { label: "Running", colour: "#2d6cdf" },
  completed: { label: "Completed", colour: "#1f9d55" },
  failed: { label: "Failed", colour: "#d43a3a" },
  cancelled: { label: "Cancelled", colour: "#9aa0a6" },
  lost: { label: "Lost (retries used up)", colour: "#8e44ad" },
};
export const jobState = (s: string) => JOB_STATES[s] ?? { label: s, colour: "#9aa0a6" };

export function Pill({ label, colour }: { label: string; colour: string }) {
  return (
    <span class="pill">
      <i style={{ background: colour }} />
      {label}
    </span>
  );
}

/** Counts as horizontal bars, largest first: "Donating ████ 3". */
export function CountBars({ counts, names, name }: { counts: Record<string, number | undefined>; names: (k: string) => { label: string; colour: string }; name: string }) {
  const rows = Object.entries(counts)
    .filter(([, n]) => (n ?? 0) > 0)
    .sort((a, b) => (b[1] ?? 0) - (a[1] ?? 0));
  const max = Math.max(1, ...rows.map(([, n]) => n ?? 0));
  return (
    <table class="bars" data-testid={name}>
      <tbody>
        {rows.map(([k, n]) => (
          <tr data-state={k}>
            <th>{names(k).label}</th>
            <td class="bar">
              <span style={{ width: `${((n ?? 0) / max) * 100}%`, background: names(k).colour }} />
            </td>
            <td class="num" data-value={n}>
              {n}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

// The tray windows' only door to the agent: Tauri commands implemented in
// src-tauri/src/commands.rs, which speak the agent's local control protocol. The types
// come from bindings.ts, generated from the Rust types (never written by hand).
import { invoke } from "@tauri-apps/api/core";
import type { AgentStatus, CalibrationView, Config, FieldError, OwnerActions, Settings, StateKind, TodayReport } from "./bindings";

export type { AgentStatus, CalibrationView, Config, FieldError, OwnerActions, Settings, StateKind, TodayReport };

export const status = () => invoke<AgentStatus>("status");
export const today = () => invoke<TodayReport>("today");
export const getSettings = () => invoke<Settings>("get_settings");
/** Saves, or rejects with a FieldError naming the field at fault. */
export const saveSettings = (settings: Settings) => invoke<Settings>("save_settings", { settings });
/** The names of the programs running now (for the exclusive-programs picker). */
export const runningPrograms = () => invoke<string[]>("running_programs");
/** This machine's thresholds derived from its own recorded trace, for a daily budget (nothing is applied). */
export const calibrate = (budget: number) => invoke<CalibrationView>("calibrate", { budget });
/** Why Lull runs without a visible tray icon, if it does. */
export const fallback = () => invoke<string | null>("fallback");
export const openWindow = (which: "status" | "settings") => invoke<void>("open_window", { which });
/** The tray menu's Donate now, Pause and Resume choices (the same ids, words and durations). */
export const ownerActions = () => invoke<OwnerActions>("owner_actions");
/** Does one of those choices (the tray menu's control request); the agent's new status. */
export const act = (choice: string) => invoke<AgentStatus>("act", { choice });
/** Stops Lull, agent included, as the tray menu's Quit does. */
export const quitLull = () => invoke<void>("quit_lull");

/** How long, for people: "1 h 20 min", "45 s". */
export function human(secs: number): string {
  const s = Math.round(secs);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  const rest = m % 60;
  return rest ? `${h} h ${rest} min` : `${h} h`;
}

/** The words and colour for each state; the tray icons use the same colours. */
export const STATES: Record<StateKind, { label: string; colour: string; group: Group }> = {
  owner_active: { label: "You are using this machine", colour: "#2d6cdf", group: "owner" },
  idle: { label: "Idle", colour: "#b9bec7", group: "idle" },
  recruitable: { label: "Idle, ready for guest work", colour: "#b9bec7", group: "idle" },
  donating: { label: "Donating", colour: "#1f9d55", group: "donating" },
  lingering: { label: "Donating quietly while you work", colour: "#1f9d55", group: "donating" },
  lending_light: { label: "Lending while you work lightly", colour: "#1f9d55", group: "donating" },
  evicting: { label: "Stopping guest work", colour: "#2d6cdf", group: "owner" },
  paused: { label: "Paused", colour: "#e08a00", group: "paused" },
  out_of_budget: { label: "Out of today's interruptions", colour: "#d43a3a", group: "paused" },
  not_allowed: { label: "Not allowed now", colour: "#4b5058", group: "paused" },
};

export type Group = "owner" | "idle" | "donating" | "paused";
export const GROUPS: Record<Group, { label: string; colour: string }> = {
  owner: { label: "You active", colour: "#2d6cdf" },
  idle: { label: "Idle", colour: "#b9bec7" },
  donating: { label: "Donating", colour: "#1f9d55" },
  paused: { label: "Paused / not allowed", colour: "#e08a00" },
};

// Entry point: each tray window loads this page with ?view=status or ?view=settings.
import { render } from "preact";
import { getCurrentWindow } from "@tauri-apps/api/window";
import { StatusView } from "./status";
import { SettingsView } from "./settings";
import "./style.css";

const view = new URLSearchParams(location.search).get("view") ?? "status";
// Escape closes the window; closing tears the webview down (nothing stays in memory).
addEventListener("keydown", (e) => {
  if (e.key === "Escape") void getCurrentWindow().close();
});
const root = document.getElementById("app");
if (root) render(view === "settings" ? <SettingsView /> : <StatusView />, root);

// Two builds from one source tree. The default builds the tray windows into dist/, which
// the Tauri crate embeds at compile time. `--mode dashboard` builds the coordinator
// dashboard (dashboard.html) into dist-dashboard/, which the coordinator embeds
// (rust-embed); its asset URLs are relative so it also works behind a path prefix.
// Preact's JSX runtime is used directly through esbuild, so no framework plugin is needed.
import { defineConfig } from "vite";

export default defineConfig(({ mode }) => {
  const dashboard = mode === "dashboard";
  return {
    clearScreen: false,
    esbuild: { jsx: "automatic", jsxImportSource: "preact" },
    base: dashboard ? "./" : "/",
    publicDir: dashboard ? false : "public",
    build: {
      outDir: dashboard ? "dist-dashboard" : "dist",
      emptyOutDir: true,
      target: "es2022",
      sourcemap: false,
      chunkSizeWarningLimit: 200,
      rollupOptions: dashboard ? { input: "dashboard.html" } : undefined,
    },
    server: { port: 5173, strictPort: true },
  };
});

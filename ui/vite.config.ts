// Vite builds the tray windows into dist/, which the Tauri crate embeds at compile time.
// Preact's JSX runtime is used directly through esbuild, so no framework plugin is needed.
import { defineConfig } from "vite";

export default defineConfig({
  clearScreen: false,
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: { outDir: "dist", emptyOutDir: true, target: "es2022", sourcemap: false, chunkSizeWarningLimit: 200 },
  server: { port: 5173, strictPort: true },
});

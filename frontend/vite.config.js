import { defineConfig } from "vite";
import vue from "@vitejs/plugin-vue";

export default defineConfig({
  plugins: [vue()],
  // Django serves the build through staticfiles: frontend/dist is mounted as "panel"
  // (trinity/settings.py), so every asset URL starts with /static/panel/.
  base: "/static/panel/",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    // One small app: keep the output to a script and a stylesheet. Chart.js is most of
    // it; the agent console and the turn replay brought it past 400 kB.
    chunkSizeWarningLimit: 450,
  },
  server: {
    // `npm run dev` against a running `make run` (the API and the session live there).
    proxy: { "/api": "http://127.0.0.1:8000" },
  },
  test: {
    environment: "jsdom",
    include: ["src/**/*.test.js"],
    restoreMocks: true,
  },
});

import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// The sidecar's API routes; the dev server forwards them so the page and the API share one origin, exactly
// as when the sidecar serves the built files.
const API_PREFIXES = [
  '/tx',
  '/internal',
  '/status',
  '/tip',
  '/queue',
  '/lifecycle',
  '/bundle',
  '/policy',
  '/metrics',
  '/readyz',
  '/healthz',
  '/openapi.json',
];

const apiTarget = `http://127.0.0.1:${process.env.API_PORT ?? '7777'}`;

export default defineConfig({
  plugins: [react()],
  // Relative asset URLs: the build works wherever it is served from (the sidecar serves it at `/`).
  base: './',
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    sourcemap: false,
    // Hashed names come from content only, so the same sources give the same files (turbo caches them).
    chunkSizeWarningLimit: 1_000,
  },
  server: {
    host: '127.0.0.1',
    port: Number(process.env.WEB_PORT ?? 5173),
    strictPort: false,
    proxy: Object.fromEntries(
      API_PREFIXES.map((prefix) => [
        prefix,
        {
          target: apiTarget,
          changeOrigin: false,
          // SSE (`/internal/events`, `/tx/events/...`) must not be buffered or time out while idle.
          timeout: 0,
          proxyTimeout: 0,
        },
      ]),
    ),
  },
});

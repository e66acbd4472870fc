// Builds the static dashboard into dist/ (served by the coordinator at /). Relative asset
// paths so it also works from a sub-path or straight from the file system. `npm run dev`
// proxies the API to a coordinator on HEADLAB_API (default 127.0.0.1:8321).
import { defineConfig } from 'vite';

export default defineConfig({
  base: './',
  build: { outDir: 'dist', emptyOutDir: true, chunkSizeWarningLimit: 200 },
  server: {
    proxy: { '/api': process.env.HEADLAB_API || 'http://127.0.0.1:8321' },
  },
});

#!/usr/bin/env bash
# Builds the dashboard into dashboards/dist (served by the coordinator at /): npm ci from
# the lockfile, then vite build. Idempotent: does nothing when dist/ is newer than every
# source and the lockfile. Needs node >= 20 and npm; only the npm registry is contacted.
set -euo pipefail
cd "$(dirname "$0")"
stamp=dist/index.html
if [ -f "$stamp" ] && [ -z "$(find index.html vite.config.js package.json package-lock.json src \
     -newer "$stamp" -print -quit)" ]; then
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "dashboards/build.sh: npm not found (install nodejs >= 20 and npm)" >&2
  exit 1
fi
# Reinstall only when the lockfile changed since the last install.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
npm run --silent build -- --logLevel warn
touch "$stamp"
echo "dashboards: built $(pwd)/dist"

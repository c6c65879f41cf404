#!/usr/bin/env bash
# Runs every package's tests (after bootstrap) and prints one closing line with
# the counts summed over the workspace. Exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1

bash tooling/bootstrap.sh || exit 1

# The browser tests run in Debian's Chromium; without it (and without root to install it) they skip.
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test: installing chromium (browser tests) with apt-get"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "test: /usr/bin/chromium is missing, so the browser tests will skip (sudo apt-get install chromium)"
  fi
fi

results="$PWD/.kiln-test-results"
rm -rf "$results"
mkdir -p "$results"
KILN_TEST_RESULTS="$results" pnpm turbo run test --concurrency=1 --continue
status=$?

node -e '
  const fs = require("fs"), path = require("path");
  const dir = process.argv[1];
  const t = { passed: 0, failed: 0, skipped: 0 };
  for (const f of fs.readdirSync(dir)) {
    const c = JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"));
    for (const k of Object.keys(t)) t[k] += c[k];
  }
  console.log(`total: ${t.passed} passed, ${t.failed} failed, ${t.skipped} skipped`);
  process.exit(t.failed > 0 ? 1 : 0);
' "$results"
sum_status=$?
[ $status -eq 0 ] && [ $sum_status -eq 0 ]

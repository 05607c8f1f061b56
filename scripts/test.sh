#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the meson suites (unit,
# ctl, wire, e2e), a bounded libFuzzer run and a release build. Exits non-zero
# on any failure and ends with one summary line, "test.sh: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh || exit 1

BUILD_DIR=${BUILD_DIR:-build}
# Warnings are errors in our own runs (and so in CI), not in a packager's build.
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  meson setup "$BUILD_DIR" -Dwerror=true || exit 1
else
  meson configure "$BUILD_DIR" -Dwerror=true || exit 1
fi
ninja -C "$BUILD_DIR" || exit 1

# One test at a time: the end-to-end tests share the host's namespaces and
# veths, and the machine has two cores anyway.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
meson test -C "$BUILD_DIR" --print-errorlogs --num-processes 1 2>&1 | tee "$log"
meson_rc=${PIPESTATUS[0]}
count() { awk -v k="$1" '$1 == k { print $2; exit }' "$log"; }
passed=$(count "Ok:"); failed=$(count "Fail:"); timed_out=$(count "Timeout:")
passed=${passed:-0}; failed=$(( ${failed:-0} + ${timed_out:-0} ))
if [ "$meson_rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi

if scripts/fuzz.sh; then passed=$((passed + 1)); else failed=$((failed + 1)); fi

# A release build (-O3) is where GCC's false positives show up; it must build
# warning-free, so that a packager's build never meets one.
RELEASE_DIR=${RELEASE_DIR:-build-release}
if { [ -f "$RELEASE_DIR/build.ninja" ] || meson setup "$RELEASE_DIR" -Dbuildtype=release -Dwerror=true >/dev/null; } &&
   ninja -C "$RELEASE_DIR" >"$log" 2>&1; then
  echo "release build: ok"; passed=$((passed + 1))
else
  tail -40 "$log"; echo "release build: FAILED"; failed=$((failed + 1))
fi

echo "test.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

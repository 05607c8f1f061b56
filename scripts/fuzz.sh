#!/usr/bin/env bash
# Builds the libFuzzer harness (clang, ASan + UBSan over the harness AND the
# core library) in its own build dir and runs it for a bounded number of runs
# over a copy of the seed corpus. Exits non-zero on any crash, leak, sanitizer
# report, or build failure.
#
#   scripts/fuzz.sh                 # FUZZ_RUNS=2000000 by default (~15 s here)
#   FUZZ_RUNS=20000000 scripts/fuzz.sh
#   FUZZ_BUILD_DIR=/tmp/bf scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
RUNS=${FUZZ_RUNS:-2000000}
CORPUS_SEED=tests/fuzz/corpus

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # b_lundef=false: clang's sanitizer runtimes leave symbols for the final link.
  CXX=${FUZZ_CXX:-clang++} meson setup "$BUILD_DIR" \
    -Dfuzz=true -Dtests=false -Dbenchmarks=false -Ddataplane=disabled \
    -Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false \
    -Dcpp_args="['-fsanitize=fuzzer-no-link','-fno-sanitize-recover=all','-fno-omit-frame-pointer']"
fi
ninja -C "$BUILD_DIR" tests/fuzz/packet_fuzzer

work=$(mktemp -d "${TMPDIR:-/tmp}/maglb-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"
cp "$CORPUS_SEED"/*.bin "$work/corpus/"

echo "fuzz.sh: packet_fuzzer, $RUNS runs over $(ls "$work/corpus" | wc -l) seeds"
# Frames up to jumbo size; a fixed seed so a run is reproducible.
if ! ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  "$BUILD_DIR/tests/fuzz/packet_fuzzer" -runs="$RUNS" -max_len=9018 -seed=1 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus"; then
  echo "fuzz.sh: FAILED; crashing inputs:" >&2
  mkdir -p "$BUILD_DIR/fuzz-artifacts"
  cp "$work"/artifacts/* "$BUILD_DIR/fuzz-artifacts/" 2>/dev/null || true
  ls -l "$BUILD_DIR/fuzz-artifacts" >&2 || true
  exit 1
fi
echo "fuzz.sh: no crash in $RUNS runs"

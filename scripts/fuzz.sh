#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan + UBSan over the harness AND the
# core library) in their own build dir and runs each for a bounded number of
# runs over a copy of its seed corpus:
#  - packet_fuzzer: one Ethernet frame per input (tests/fuzz/corpus/*.bin);
#  - config_fuzzer: one config file per input (tests/fuzz/config_corpus/*.toml
#    plus config/*.toml), with a TOML dictionary.
# Exits non-zero on any crash, leak, timeout, sanitizer report, or build
# failure, after running every target; crashing inputs are kept under
# $BUILD_DIR/fuzz-artifacts/TARGET/ with the command that replays them.
#
#   scripts/fuzz.sh                 # FUZZ_RUNS=2000000 (~15 s here), FUZZ_CONFIG_RUNS=100000 (~18 s)
#   FUZZ_RUNS=20000000 FUZZ_CONFIG_RUNS=5000000 scripts/fuzz.sh
#   FUZZ_TARGETS=config_fuzzer scripts/fuzz.sh
#   FUZZ_ARGS="-jobs=4 -workers=4" scripts/fuzz.sh   # extra libFuzzer flags for every target
#   FUZZ_BUILD_DIR=/tmp/bf scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
RUNS=${FUZZ_RUNS:-2000000}
# The config fuzzer ran 5.5k inputs/s here (ASan build, a 256 KiB-stack
# thread per input, 2 cores shared with other builds): 100k take ~18 s.
CONFIG_RUNS=${FUZZ_CONFIG_RUNS:-100000}
read -r -a EXTRA_ARGS <<< "${FUZZ_ARGS:-}"
TARGETS=${FUZZ_TARGETS:-packet_fuzzer config_fuzzer}

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # b_lundef=false: clang's sanitizer runtimes leave symbols for the final link.
  CXX=${FUZZ_CXX:-clang++} meson setup "$BUILD_DIR" \
    -Dfuzz=true -Dtests=false -Dbenchmarks=false -Ddataplane=disabled \
    -Dwerror=true -Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false \
    -Dcpp_args="['-fsanitize=fuzzer-no-link','-fno-sanitize-recover=all','-fno-omit-frame-pointer']"
fi
ninja -C "$BUILD_DIR" $(for t in $TARGETS; do echo "tests/fuzz/$t"; done)

work=$(mktemp -d "${TMPDIR:-/tmp}/maglb-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=""

# run_target NAME RUNS SEED_FILES... -- FUZZER_ARGS...
run_target() {
  local name=$1 runs=$2
  shift 2
  local seeds=()
  while [ "$1" != "--" ]; do seeds+=("$1"); shift; done
  shift
  local corpus="$work/$name/corpus" artifacts="$work/$name/artifacts"
  mkdir -p "$corpus" "$artifacts"
  cp "${seeds[@]}" "$corpus/"
  echo "fuzz.sh: $name, $runs runs over $(ls "$corpus" | wc -l) seeds"
  # A fixed seed so that a run is reproducible.
  if ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$BUILD_DIR/tests/fuzz/$name" -runs="$runs" -seed=1 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$@" ${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"} "$corpus"; then
    echo "fuzz.sh: $name: no crash in $runs runs"
    return 0
  fi
  # Whatever the fuzzer left (crash-, leak-, timeout-, oom- files) outlives $work.
  local keep="$BUILD_DIR/fuzz-artifacts/$name"
  mkdir -p "$keep"
  cp "$artifacts"/* "$keep/" 2>/dev/null || true
  echo "fuzz.sh: $name FAILED; inputs it left (replay: $BUILD_DIR/tests/fuzz/$name FILE):" >&2
  if ! ls -l "$keep" >&2 || [ -z "$(ls -A "$keep")" ]; then
    echo "fuzz.sh: $name left no input (killed? see the log above)" >&2
  fi
  failed="$failed $name"
}

for t in $TARGETS; do
  case $t in
    packet_fuzzer)
      # Frames up to jumbo size.
      run_target packet_fuzzer "$RUNS" tests/fuzz/corpus/*.bin -- -max_len=9018 ;;
    config_fuzzer)
      # Inputs up to 8 KB: long enough for every nesting attack (17 parts),
      # short enough to keep the rate up. A slow input is a failure: parsing
      # must stay linear (-timeout) and small (-rss_limit_mb).
      run_target config_fuzzer "$CONFIG_RUNS" tests/fuzz/config_corpus/*.toml config/*.toml -- \
        -max_len=8192 -dict=tests/fuzz/config.dict -timeout=10 -rss_limit_mb=2048 ;;
    *)
      echo "fuzz.sh: unknown target $t" >&2
      failed="$failed $t" ;;
  esac
done

if [ -n "$failed" ]; then
  echo "fuzz.sh: FAILED:$failed" >&2
  exit 1
fi
echo "fuzz.sh: every target passed"

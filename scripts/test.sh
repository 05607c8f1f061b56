#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  meson setup "$BUILD_DIR"
fi
ninja -C "$BUILD_DIR"

# Unit and end-to-end tests. One at a time: end-to-end tests share the host's
# namespaces and veths, and the machine has two cores anyway.
meson test -C "$BUILD_DIR" --print-errorlogs --num-processes 1
scripts/fuzz.sh

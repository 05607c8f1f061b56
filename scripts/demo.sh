#!/usr/bin/env bash
# maglb in two minutes: installs what is missing, builds, shows the tables of
# config/example.toml, then runs the real thing on a namespace testbed
# (scripts/testbed.sh): maglb on a DPDK net_pcap port (frames as on the wire), HTTP and UDP
# through GRE, IP-in-IP and L2 DSR VIPs, and a backend added live while a
# download streams. Needs root (network namespaces). Tears everything down.
# `scripts/demo.sh fleet`: two instances behind a BGP/ECMP router instead,
# one killed while connections run through both (tests/e2e/demo_fleet.py).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
scripts/install-deps.sh
[ -f "$BUILD_DIR/build.ninja" ] || meson setup "$BUILD_DIR" >/dev/null
ninja -C "$BUILD_DIR" >/dev/null
CTL="$BUILD_DIR/src/ctl/maglbctl"
MODE=${1:-}
case "$MODE" in ""|fleet) ;; *) echo "usage: $0 [fleet]" >&2; exit 2 ;; esac

banner() { printf '\n== %s\n\n' "$*"; }

banner "The tables of config/example.toml (maglbctl table)"
"$CTL" table --config config/example.toml

if [ "$(id -u)" -ne 0 ]; then
  echo "demo: the live part needs root (network namespaces); stopping here"
  exit 0
fi
MAGLB_BUILD_DIR="$(cd "$BUILD_DIR" && pwd)" MAGLB_SOURCE_DIR="$(pwd)" \
  exec /usr/bin/python3 "tests/e2e/demo${MODE:+_$MODE}.py"

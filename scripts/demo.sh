#!/usr/bin/env bash
# Installs what is missing, builds, and shows the table tools on config/example.toml.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
CTL=build/src/ctl/maglbctl

banner() { printf '\n== %s\n\n' "$*"; }

banner "The tables of config/example.toml"
$CTL table --config config/example.toml

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The same config with one more backend in VIP "web" and web-b drained.
awk '
  { print }
  /^  name = "web-c"/ { in_c = 1 }
  in_c && /^  weight = 2/ {
    print ""; print "  [[vip.backend]]"; print "  name = \"web-d\""; print "  address = \"203.0.113.4\""
    in_c = 0
  }' config/example.toml | sed '/name = "web-b"/,/weight/ s/weight = 1/weight = 0/' > "$tmp/new.toml"

banner "Preview of a reload that adds web-d and drains web-b (maglbctl diff)"
$CTL diff config/example.toml "$tmp/new.toml"

banner "The new table"
$CTL table --config "$tmp/new.toml" --vip web

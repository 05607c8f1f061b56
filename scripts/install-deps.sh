#!/usr/bin/env bash
# Installs, with apt-get, everything that building, testing, benchmarking and
# test mode need. Idempotent: skips what is present, and runs `apt-get update`
# only when something is missing.
set -euo pipefail

PACKAGES=(
  build-essential g++ pkg-config meson ninja-build
  clang libfuzzer-14-dev libclang-rt-14-dev
  libdpdk-dev dpdk-dev
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  libtomlplusplus-dev nlohmann-json3-dev
  libmnl-dev libcurl4-openssl-dev libcpp-httplib-dev libmicrohttpd-dev ccache
  systemd  # systemd.pc (the unit directory) and systemd-analyze (tests/install)
  bird2 prometheus
  iproute2 ethtool nftables procps psmisc curl iputils-ping
  python3 python3-scapy python3-xxhash tshark
  gnuplot-nox
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer no, non-interactively.
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# bird2 enables a system-wide bird.service with Debian's sample config; the
# fleet testbed runs its own BIRDs in its namespaces, so the one we just
# installed is turned off again rather than left running as a router.
if [[ " ${missing[*]} " == *" bird2 "* ]] && command -v systemctl >/dev/null 2>&1 &&
   [ -d /run/systemd/system ]; then
  if $SUDO systemctl disable --now bird.service >/dev/null 2>&1; then
    echo "install-deps: disabled the bird.service that bird2 enabled (the fleet testbed starts its own)"
  fi
fi
# prometheus likewise enables a prometheus.service scraping localhost; the
# tests want only its promtool and a server of their own (e2e_prometheus).
if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null 2>&1 &&
   [ -d /run/systemd/system ]; then
  if $SUDO systemctl disable --now prometheus.service >/dev/null 2>&1; then
    echo "install-deps: disabled the prometheus.service that prometheus enabled (e2e_prometheus starts its own)"
  fi
fi

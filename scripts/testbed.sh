#!/usr/bin/env bash
# The test topology of maglb: network namespaces joined by veth, with real
# servers on the backends. No kernel tunnel modules are needed: backends
# decapsulate GRE and IP-in-IP in user space (maglb-decap: AF_PACKET in, TUN
# out), and L2 DSR needs only the VIP on the backends' loopback.
#
#   mlb-client (10.0.1.2, fd01::2)
#        | c0 / eth0
#   mlb-router (10.0.1.1 | bridge br0 10.0.0.1, fd00::1)  routes the VIPs to the LB
#        | br0: lbp   be1p   be2p   be3p   be4p
#   mlb-lb  (lb0: the DPDK port, no kernel address; maglb answers as 10.0.0.10;
#            with [kernel] interface, maglb's kernel interface maglb0 carries
#            10.0.0.10 and fd00::10 for the kernel: `kernel-routes` routes it)
#        | lb1: a second port for two-arm mode, on the router's bridge br1
#          (10.0.2.1, fd02::1): encapsulated packets leave by it and the
#          router forwards them to the backends
#   mlb-be1..mlb-be4 (eth0 10.0.0.11..14; VIPs 10.100.0.1-4 on lo, arp_ignore;
#                     HTTP on :80 answering its name, UDP echo on :7777,
#                     maglb-decap into TUN decap0)
# Backends answer clients directly (DSR) through the router.
#
# fleet-up [2|3] (default 3) builds the same client, router and backends, but
# instead of mlb-lb N maglb instances mlb-lb-a..c (port lb0 onto br0, MAC
# 02:4d:4c:00:00:2N, addresses 10.0.0.2N / fd00::2N for maglb and its kernel
# interface maglb0), and no static VIP route: the router runs BIRD
# (config/bird/router.conf, AS 65000, ECMP into the kernel) with one eBGP
# session to each instance's BIRD (config/bird/maglb-instance.conf, AS 65010),
# which announces the routes maglb puts into kernel table 4242 of its
# namespace. Configs, logs, pid files and control sockets: $STATE/bird-*.
#
# usage: scripts/testbed.sh up|down|status|kernel-routes [IFACE]|service BACKEND server|decap stop|start
#        scripts/testbed.sh fleet-up [2|3]|fleet-routes|bird router|lb-a|lb-b|lb-c start|stop|birdc CMD...
#   fleet-routes: the router's routes to the VIPs (one next hop per announcing instance)
#   bird: starts or stops one BIRD of the fleet, or runs birdc on its socket
#   kernel-routes: once maglb has made its kernel interface IFACE (default
#   maglb0) in mlb-lb, default routes via the router (10.0.0.1, fd00::1) on it
#   service: stops (by its pid file) or starts again one backend's HTTP/UDP
#   server or its decapsulator, as the health tests do
# Environment: BUILD_DIR (where maglb-decap was built; default build),
#              MLB_TESTBED_MTU (MTU of every link but the LB's; default 1500;
#              9000 for jumbo tests),
#              MLB_STATE (state directory; default /run/mlb-testbed),
#              MLB_TESTBED_LOCK_FD (a descriptor on which the caller already
#              holds the lock, as the e2e harness does).
#              MLB_FLEET_BFD (fleet: 1 = BFD 100 ms x 3 on the BGP sessions,
#              the default; 0 = BGP hold time 3 s only),
#              MLB_FLEET_HASH_POLICY (fleet: the router's ECMP hash, 3 = the
#              5-tuple, the default, or 1 = L4; fleet_up says why).
# up and down take /run/mlb-testbed.lock, the lock the e2e harness holds for
# a whole run, so that a manual up/down waits instead of tearing a run down.
# errtrace: the ERR trap of up / fleet-up also fires in the functions they call.
set -Eeuo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-build}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
STATE="${MLB_STATE:-/run/mlb-testbed}"
PY=/usr/bin/python3
MTU="${MLB_TESTBED_MTU:-1500}"
# The LB's own links (lb0/lbp, lb1/lb1p) always take the largest lb.mtu the
# config allows: maglb's `mtu` is what limits its frames, and the link must
# never drop or cut one the config lets through (a veth drops frames over its
# MTU; libpcap, in TPACKET_V2 mode, sizes its ring frames from it at open).
LB_LINK_MTU=9216

NS_CLIENT=mlb-client
NS_ROUTER=mlb-router
NS_LB=mlb-lb
BACKENDS=(be1 be2 be3 be4)
# The fleet (fleet-up): maglb instances a, b, c, each in its own namespace
# with its own port onto br0, behind the router's BGP multipath.
FLEET=(a b c)
FLEET_AS=65010   # every instance: equal AS paths, so the router merges them
ROUTER_AS=65000
VIP_TABLE=4242   # the kernel table in which maglb puts the routes to announce
VIP_ROUTE_PROTOCOL=249  # and the protocol of its routes ([announce] route_protocol's default)
FLEET_BFD="${MLB_FLEET_BFD:-1}"
HASH_POLICY="${MLB_FLEET_HASH_POLICY:-3}"  # the router's ECMP hash (fleet_up says why 3)
BIRD=/usr/sbin/bird
BIRDC=/usr/sbin/birdc
NS_BACKENDS=()
for b in "${BACKENDS[@]}"; do NS_BACKENDS+=("mlb-$b"); done
NS_FLEET=()
for f in "${FLEET[@]}"; do NS_FLEET+=("mlb-lb-$f"); done
# All the namespaces either topology may have made (down removes them all).
NAMESPACES=("$NS_CLIENT" "$NS_ROUTER" "$NS_LB" "${NS_FLEET[@]}" "${NS_BACKENDS[@]}")

VIPS_V4=(10.100.0.1 10.100.0.2 10.100.0.3 10.100.0.4)  # .4: for VIPs added live
VIPS_V6=(fd00:100::1 fd00:100::2 fd00:100::3)
LB_MAC=02:4d:4c:00:00:0a
HTTP_PORT=80
UDP_PORT=7777

log() { echo "testbed: $*" >&2; }
nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

# Offloads off: frames that maglb captures (net_pcap / net_af_packet) must
# carry full checksums and be at most one MTU, as on a wire.
no_offload() { nsx "$1" ethtool -K "$2" tx off tso off gso off gro off >/dev/null 2>&1 || true; }

down() {
  # The processes inside our namespaces (started by us: nothing else runs
  # there). Not the pid files: after a crash their numbers may be reused.
  for ns in "${NAMESPACES[@]}"; do
    if ip netns list | grep -qw "^$ns"; then
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
    fi
  done
  sleep 0.2
  for ns in "${NAMESPACES[@]}"; do
    if ip netns list | grep -qw "^$ns"; then
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
      ip netns del "$ns" 2>/dev/null || true
    fi
  done
  # veth ends still in the root namespace if `up` failed half way.
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^mlb-' || true); do
    ip link del "$l" 2>/dev/null || true
  done
  rm -rf "$STATE"
}

# veth NAME_A in NS_A <-> NAME_B in NS_B (created in the root namespace under
# temporary mlb- names, so a failure leaves only things `down` removes).
veth() {
  local ns_a=$1 a=$2 ns_b=$3 b=$4 mtu=${5:-$MTU} tmp_a="mlb-t$RANDOM" tmp_b="mlb-t$RANDOM"
  ip link add "$tmp_a" mtu "$mtu" type veth peer name "$tmp_b" mtu "$mtu"
  ip link set "$tmp_a" netns "$ns_a"
  ip link set "$tmp_b" netns "$ns_b"
  nsx "$ns_a" ip link set "$tmp_a" name "$a"
  nsx "$ns_b" ip link set "$tmp_b" name "$b"
  no_offload "$ns_a" "$a"
  no_offload "$ns_b" "$b"
}

start_bg() {  # NAME NS CMD...: runs CMD in NS in the background, pid in $STATE/NAME.pid
  local name=$1 ns=$2; shift 2
  # Without the lock's descriptor: a server holding it would outlive `up` and
  # make the next `down` wait for a lock that nobody releases.
  ip netns exec "$ns" setsid "$@" >"$STATE/$name.log" 2>&1 </dev/null {LOCK_FD}>&- &
  echo $! >"$STATE/$name.pid"
}

check_decap() {
  if [ ! -x "$BUILD_DIR/tests/e2e/maglb-decap" ]; then
    log "error: $BUILD_DIR/tests/e2e/maglb-decap not found; build first (ninja -C $BUILD_DIR) or set BUILD_DIR"
    exit 1
  fi
}

make_namespaces() {
  for ns in "$@"; do
    ip netns add "$ns"
    nsx "$ns" ip link set lo up
  done
}

router_and_client() {
  # Router: client side, and a bridge for the LB / backend segment.
  veth "$NS_CLIENT" eth0 "$NS_ROUTER" c0
  nsx "$NS_ROUTER" ip link add br0 type bridge
  nsx "$NS_ROUTER" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1 \
    net.ipv4.conf.all.send_redirects=0 net.ipv4.conf.default.send_redirects=0 \
    net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
  nsx "$NS_ROUTER" ip addr add 10.0.1.1/24 dev c0
  nsx "$NS_ROUTER" ip addr add fd01::1/64 dev c0 nodad
  nsx "$NS_ROUTER" ip link set c0 up
  nsx "$NS_ROUTER" ip addr add 10.0.0.1/24 dev br0
  nsx "$NS_ROUTER" ip addr add fd00::1/64 dev br0 nodad
  nsx "$NS_ROUTER" ip link set br0 mtu "$MTU" up  # set: lbp (LB_LINK_MTU) must not raise it
  nsx "$NS_ROUTER" sysctl -qw net.ipv4.conf.br0.send_redirects=0 net.ipv4.conf.br0.rp_filter=0 \
    net.ipv4.conf.c0.rp_filter=0
  nsx "$NS_CLIENT" ip addr add 10.0.1.2/24 dev eth0
  nsx "$NS_CLIENT" ip addr add fd01::2/64 dev eth0 nodad
  nsx "$NS_CLIENT" ip link set eth0 up
  nsx "$NS_CLIENT" ip route add default via 10.0.1.1
  nsx "$NS_CLIENT" ip -6 route add default via fd01::1
}

single_lb() {
  # The LB: one port, no kernel address (maglb answers ARP/ND for it). The
  # kernel of mlb-lb must not act on what arrives on the DPDK ports (a real
  # NIC bound to DPDK is invisible to it), since with a kernel interface it
  # owns the LB's addresses: IPv6 off, no ARP, and IPv4 dropped by strict
  # reverse-path filtering (no source routes via lb0). Packet sockets (pcap,
  # AF_PACKET) still see every frame.
  veth "$NS_LB" lb0 "$NS_ROUTER" lbp "$LB_LINK_MTU"
  nsx "$NS_LB" sysctl -qw net.ipv6.conf.lb0.disable_ipv6=1 net.ipv4.conf.lb0.rp_filter=1
  nsx "$NS_LB" ip link set lb0 arp off
  nsx "$NS_LB" ip link set lb0 address "$LB_MAC"
  nsx "$NS_LB" ip link set lb0 promisc on up
  nsx "$NS_ROUTER" ip link set lbp master br0 up
  # Two-arm mode's backend side: lb1 on a bridge of its own.
  nsx "$NS_ROUTER" ip link add br1 type bridge
  nsx "$NS_ROUTER" ip link set br1 address 02:4d:4c:00:02:01  # fixed: a static [[neighbor]] in tests
  nsx "$NS_ROUTER" ip addr add 10.0.2.1/24 dev br1
  nsx "$NS_ROUTER" ip addr add fd02::1/64 dev br1 nodad
  nsx "$NS_ROUTER" ip link set br1 mtu "$MTU" up  # likewise for lb1p
  nsx "$NS_ROUTER" sysctl -qw net.ipv4.conf.br1.rp_filter=0 net.ipv4.conf.br1.send_redirects=0
  veth "$NS_LB" lb1 "$NS_ROUTER" lb1p "$LB_LINK_MTU"
  nsx "$NS_LB" sysctl -qw net.ipv6.conf.lb1.disable_ipv6=1 net.ipv4.conf.lb1.rp_filter=1
  nsx "$NS_LB" ip link set lb1 arp off
  # The MAC two-arm maglb gives its backend port (its front port's): net_pcap
  # (phy_mac=1) reads it from the interface and cannot set it.
  nsx "$NS_LB" ip link set lb1 address "$LB_MAC"
  nsx "$NS_LB" ip link set lb1 promisc on up
  nsx "$NS_ROUTER" ip link set lb1p master br1 up
}

backends() {
  local decap="$BUILD_DIR/tests/e2e/maglb-decap"
  local i=0
  for b in "${BACKENDS[@]}"; do
    i=$((i + 1))
    local ns="mlb-$b"
    veth "$ns" eth0 "$NS_ROUTER" "${b}p"
    nsx "$NS_ROUTER" ip link set "${b}p" master br0 up
    nsx "$ns" ip link set eth0 address "02:4d:4c:00:01:1$i"
    nsx "$ns" ip addr add "10.0.0.1$i/24" dev eth0
    nsx "$ns" ip addr add "fd00::1$i/64" dev eth0 nodad
    nsx "$ns" ip link set eth0 up
    nsx "$ns" ip route add default via 10.0.0.1
    nsx "$ns" ip -6 route add default via fd00::1
    # VIPs on loopback; never answer ARP for them (L2 DSR: only the LB does).
    nsx "$ns" sysctl -qw net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2 \
      net.ipv4.conf.eth0.arp_ignore=1 net.ipv4.conf.eth0.arp_announce=2 \
      net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
      net.ipv4.conf.eth0.rp_filter=0
    for v in "${VIPS_V4[@]}"; do nsx "$ns" ip addr add "$v/32" dev lo; done
    for v in "${VIPS_V6[@]}"; do nsx "$ns" ip addr add "$v/128" dev lo nodad; done
    # The decapsulated packets enter through this TUN device; their source is
    # the client, which routes via eth0: reverse-path filtering must be off.
    nsx "$ns" ip tuntap add dev decap0 mode tun
    nsx "$ns" sysctl -qw net.ipv4.conf.decap0.rp_filter=0 net.ipv4.conf.decap0.accept_local=1
    nsx "$ns" ip link set decap0 mtu "$MTU" up
    start_bg "$b-decap" "$ns" "$decap" --iface eth0 --tun decap0
    start_bg "$b-server" "$ns" "$PY" "$ROOT/tests/e2e/backend_server.py" --name "$b" \
      --http-port "$HTTP_PORT" --udp-port "$UDP_PORT" \
      --udp-bind "$(IFS=,; echo "${VIPS_V4[*]},${VIPS_V6[*]}")"
  done
}

wait_backends() {
  # Wait until every server answers locally (bounded).
  for b in "${BACKENDS[@]}"; do
    local ok=0
    for _ in $(seq 1 50); do
      if nsx "mlb-$b" curl -s -m 1 "http://10.0.0.1${b#be}:$HTTP_PORT/" >/dev/null 2>&1; then ok=1; break; fi
      sleep 0.1
    done
    if [ $ok -ne 1 ]; then log "error: HTTP server on $b did not start (see $STATE/$b-server.log)"; false; fi
    if ! kill -0 "$(cat "$STATE/$b-decap.pid")" 2>/dev/null; then
      log "error: maglb-decap on $b exited: $(cat "$STATE/$b-decap.log")"; false
    fi
  done
}

up() {
  check_decap
  down
  mkdir -p "$STATE"
  echo "$NS_CLIENT $NS_ROUTER $NS_LB ${NS_BACKENDS[*]}" >"$STATE/namespaces"
  trap 'log "error: setup failed at line $LINENO; tearing down"; down' ERR
  make_namespaces "$NS_CLIENT" "$NS_ROUTER" "$NS_LB" "${NS_BACKENDS[@]}"
  router_and_client
  nsx "$NS_ROUTER" ip route add 10.100.0.0/24 via 10.0.0.10
  nsx "$NS_ROUTER" ip -6 route add fd00:100::/64 via fd00::10
  single_lb
  backends
  wait_backends
  trap - ERR
  log "up: client 10.0.1.2, router 10.0.0.1, LB port lb0 in $NS_LB (mac $LB_MAC), backends ${BACKENDS[*]}"
}

# --- The fleet ---------------------------------------------------------
# Instance X (a, b, c = 1, 2, 3): namespace mlb-lb-X, port lb0 (MAC
# 02:4d:4c:00:00:2N) on br0 through lbXp, addresses 10.0.0.2N / fd00::2N
# (maglb answers as them; its kernel interface maglb0 carries them for the
# namespace's BGP daemon). The router has no static VIP route: it learns
# them by BGP from each instance's BIRD, which announces what maglb puts into
# kernel table $VIP_TABLE (config/bird/maglb-instance.conf).
fleet_index() { case $1 in a) echo 1 ;; b) echo 2 ;; c) echo 3 ;; *) return 1 ;; esac; }
fleet_ipv4() { echo "10.0.0.2$(fleet_index "$1")"; }
fleet_ipv6() { echo "fd00::2$(fleet_index "$1")"; }
fleet_mac() { echo "02:4d:4c:00:00:2$(fleet_index "$1")"; }

# BFD timing (both ends): 100 ms x 3, a dead instance is noticed in ~300 ms.
BFD_INTERVAL_MS=100
BFD_MULTIPLIER=3

bird_fill() {  # TEMPLATE OUT SED-ARGS...: the template with its placeholders filled
  local template=$1 out=$2; shift 2
  local bfd=on
  [ "$FLEET_BFD" = 1 ] || bfd=off
  sed -e "s/@BFD@/$bfd/g" -e "s/@BFD_INTERVAL_MS@/$BFD_INTERVAL_MS/g" \
    -e "s/@BFD_MULTIPLIER@/$BFD_MULTIPLIER/g" -e "s/@VIP_TABLE@/$VIP_TABLE/g" \
    -e "s/@ROUTE_PROTOCOL@/$VIP_ROUTE_PROTOCOL/g" "$@" "$template" >"$out"
  if grep -q '@[A-Z0-9_]*@' "$out"; then
    log "error: unfilled placeholder in $out: $(grep -o '@[A-Z0-9_]*@' "$out" | sort -u | tr '\n' ' ')"
    return 1
  fi
}

bird_configs() {  # N: the router's and the first N instances' BIRD configs in $STATE
  local n=$1 f
  bird_fill "$ROOT/config/bird/router.conf" "$STATE/bird-router.conf" \
    -e "s/@ROUTER_ID@/10.0.0.1/g" -e "s/@LOCAL_AS@/$ROUTER_AS/g" -e "s/@IFACE@/br0/g" \
    -e "s|@VIPS4@|10.100.0.0/24|g" -e "s|@VIPS6@|fd00:100::/64|g"
  for f in "${FLEET[@]:0:$n}"; do
    echo "protocol bgp lb_$f from maglb { neighbor $(fleet_ipv4 "$f") as $FLEET_AS; }" >>"$STATE/bird-router.conf"
    bird_fill "$ROOT/config/bird/maglb-instance.conf" "$STATE/bird-lb-$f.conf" \
      -e "s/@INSTANCE_IPV4@/$(fleet_ipv4 "$f")/g" -e "s/@INSTANCE_IPV6@/$(fleet_ipv6 "$f")/g" \
      -e "s/@LOCAL_AS@/$FLEET_AS/g" -e "s/@ROUTER_IPV4@/10.0.0.1/g" -e "s/@ROUTER_AS@/$ROUTER_AS/g" \
      -e "s/@KERNEL_IFACE@/maglb0/g"
  done
}

bird_ns() {  # router | lb-X: the namespace of that BIRD
  case $1 in
    router) echo "$NS_ROUTER" ;;
    lb-a|lb-b|lb-c) echo "mlb-$1" ;;
    *) log "error: no BIRD '$1' (router, lb-a, lb-b, lb-c)"; return 2 ;;
  esac
}

bird_start() {  # router | lb-X
  local name=$1 ns
  ns=$(bird_ns "$name")
  [ -f "$STATE/bird-$name.conf" ] || { log "error: no $STATE/bird-$name.conf (fleet-up first)"; return 1; }
  $BIRD -p -c "$STATE/bird-$name.conf"  # parse only: a config error says so here
  # -f: in the foreground, so that start_bg's pid is BIRD's and `down` ends it.
  start_bg "bird-$name" "$ns" "$BIRD" -f -c "$STATE/bird-$name.conf" -s "$STATE/bird-$name.ctl"
  for _ in $(seq 1 50); do
    $BIRDC -s "$STATE/bird-$name.ctl" show status >/dev/null 2>&1 && return 0
    kill -0 "$(cat "$STATE/bird-$name.pid")" 2>/dev/null || break
    sleep 0.1
  done
  log "error: BIRD $name did not start (see $STATE/bird-$name.log)"
  return 1
}

bird_stop() {
  local name=$1 pidfile="$STATE/bird-$1.pid"
  bird_ns "$name" >/dev/null
  if [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null; then
    for _ in $(seq 1 50); do kill -0 "$(cat "$pidfile")" 2>/dev/null || break; sleep 0.05; done
  fi
  rm -f "$pidfile"
}

bird_cmd() {  # bird NAME start|stop|birdc CMD...
  local name=${1:-} action=${2:-}
  shift 2 || true
  case "$action" in
    start) bird_start "$name" ;;
    stop) bird_stop "$name" ;;
    birdc) bird_ns "$name" >/dev/null; $BIRDC -s "$STATE/bird-$name.ctl" "$@" ;;
    *) echo "usage: $0 bird router|lb-a|lb-b|lb-c start|stop|birdc CMD..." >&2; exit 2 ;;
  esac
}

fleet_lb() {  # X: instance X's namespace and port
  local f=$1 ns="mlb-lb-$1" port="lb$1p"
  # As the single LB's lb0 (single_lb): invisible to the namespace's kernel.
  veth "$ns" lb0 "$NS_ROUTER" "$port" "$LB_LINK_MTU"
  nsx "$ns" sysctl -qw net.ipv6.conf.lb0.disable_ipv6=1 net.ipv4.conf.lb0.rp_filter=1
  nsx "$ns" ip link set lb0 arp off
  nsx "$ns" ip link set lb0 address "$(fleet_mac "$f")"
  nsx "$ns" ip link set lb0 promisc on up
  nsx "$NS_ROUTER" ip link set "$port" master br0 up
  # No route in the namespace: its only traffic is BGP and BFD to the router,
  # a neighbour on maglb0's own subnet.
}

fleet_up() {
  local n=${1:-3}
  case "$n" in 2|3) ;; *) log "error: fleet-up takes 2 or 3 instances, not '$n'"; exit 2 ;; esac
  case "$FLEET_BFD" in 0|1) ;; *) log "error: MLB_FLEET_BFD must be 0 or 1, not '$FLEET_BFD'"; exit 2 ;; esac
  case "$HASH_POLICY" in 1|3) ;; *) log "error: MLB_FLEET_HASH_POLICY must be 1 or 3, not '$HASH_POLICY'"; exit 2 ;; esac
  check_decap
  [ -x "$BIRD" ] || { log "error: $BIRD not found (apt-get install bird2)"; exit 1; }
  down
  mkdir -p "$STATE"
  local lbs=("${NS_FLEET[@]:0:$n}")
  echo "$NS_CLIENT $NS_ROUTER ${lbs[*]} ${NS_BACKENDS[*]}" >"$STATE/namespaces"
  trap 'log "error: setup failed at line $LINENO; tearing down"; down' ERR
  make_namespaces "$NS_CLIENT" "$NS_ROUTER" "${lbs[@]}" "${NS_BACKENDS[@]}"
  router_and_client
  # ECMP over the instances, hashed on L4 ports: the flows of one client
  # spread over all of them. Policy 1 (L4) takes a forwarded packet's
  # skb->hash when it has one, and a packet from a local TCP socket carries
  # its socket's random txhash across the veth: the instance of a connection
  # is then random, `ip route get ... sport P` cannot predict it, and it may
  # change when TCP re-rolls the hash on a timeout. Policy 3 with the 5-tuple
  # fields (0x37: addresses, protocol, ports) always hashes the headers.
  case "$HASH_POLICY" in
    1) nsx "$NS_ROUTER" sysctl -qw net.ipv4.fib_multipath_hash_policy=1 net.ipv6.fib_multipath_hash_policy=1 ;;
    3) nsx "$NS_ROUTER" sysctl -qw net.ipv4.fib_multipath_hash_policy=3 net.ipv4.fib_multipath_hash_fields=0x0037 \
         net.ipv6.fib_multipath_hash_policy=3 net.ipv6.fib_multipath_hash_fields=0x0037 ;;
  esac
  local f
  for f in "${FLEET[@]:0:$n}"; do fleet_lb "$f"; done
  backends
  wait_backends
  bird_configs "$n"
  bird_start router
  for f in "${FLEET[@]:0:$n}"; do bird_start "lb-$f"; done
  trap - ERR
  log "fleet up: $n instances (${lbs[*]}: $(for f in "${FLEET[@]:0:$n}"; do printf '%s ' "$(fleet_ipv4 "$f")"; done)), BFD $FLEET_BFD; VIP routes by BGP from kernel table $VIP_TABLE of each"
}

fleet_routes() {
  nsx "$NS_ROUTER" ip route show root 10.100.0.0/24
  nsx "$NS_ROUTER" ip -6 route show root fd00:100::/64
}

# service BACKEND server|decap stop|start: stops (by its pid file) or starts
# again one backend's HTTP/UDP server or decapsulator, as health tests do.
service() {
  local b=${1:-} what=${2:-} action=${3:-}
  case " ${BACKENDS[*]} " in *" $b "*) ;; *) log "error: no backend '$b'"; exit 2 ;; esac
  local pidfile="$STATE/$b-$what.pid"
  case "$what/$action" in
    server/stop|decap/stop)
      if [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null; then
        for _ in $(seq 1 50); do kill -0 "$(cat "$pidfile")" 2>/dev/null || break; sleep 0.05; done
      fi
      rm -f "$pidfile" ;;
    server/start)
      local vips; vips="$(IFS=,; echo "${VIPS_V4[*]},${VIPS_V6[*]}")"
      start_bg "$b-server" "mlb-$b" "$PY" "$ROOT/tests/e2e/backend_server.py" --name "$b" \
        --http-port "$HTTP_PORT" --udp-port "$UDP_PORT" --udp-bind "$vips"
      for _ in $(seq 1 50); do
        nsx "mlb-$b" curl -s -m 1 "http://10.0.0.1${b#be}:$HTTP_PORT/" >/dev/null 2>&1 && return 0
        sleep 0.1
      done
      log "error: HTTP server on $b did not start"; exit 1 ;;
    decap/start)
      start_bg "$b-decap" "mlb-$b" "$BUILD_DIR/tests/e2e/maglb-decap" --iface eth0 --tun decap0 ;;
    *) echo "usage: $0 service BACKEND server|decap stop|start" >&2; exit 2 ;;
  esac
}

# Routes of the kernel interface's stack beyond the segment (VIPs, the
# client), once maglb created the interface.
kernel_routes() {
  local iface=${1:-maglb0}
  for _ in $(seq 1 50); do
    nsx "$NS_LB" ip link show "$iface" >/dev/null 2>&1 && break
    sleep 0.1
  done
  nsx "$NS_LB" ip route replace default via 10.0.0.1 dev "$iface"
  nsx "$NS_LB" ip -6 route replace default via fd00::1 dev "$iface"
}

status() {
  local rc=0 expected=("${NAMESPACES[@]}")
  # The namespaces of the topology that is up (up or fleet-up).
  [ -f "$STATE/namespaces" ] && read -r -a expected <"$STATE/namespaces"
  for ns in "${expected[@]}"; do
    if ip netns list | grep -qw "^$ns"; then
      echo "$ns: present, $(ip netns pids "$ns" | wc -w) processes"
    else
      echo "$ns: absent"; rc=1
    fi
  done
  if [ -d "$STATE" ]; then
    for f in "$STATE"/*.pid; do
      [ -e "$f" ] || continue
      local n; n=$(basename "$f" .pid)
      if kill -0 "$(cat "$f")" 2>/dev/null; then echo "$n: running"; else echo "$n: NOT running"; rc=1; fi
    done
  fi
  return $rc
}

LOCK=/run/mlb-testbed.lock
LOCK_WAIT_S=300
# flock(2) locks belong to the open file description: a descriptor inherited
# from a caller that holds the lock locks again at once, anything else waits.
LOCK_FD=
lock_testbed() {
  LOCK_FD=${MLB_TESTBED_LOCK_FD:-}
  if [ -z "$LOCK_FD" ]; then
    exec 9>>"$LOCK"
    LOCK_FD=9
  fi
  if ! flock -n "$LOCK_FD"; then
    echo "testbed: $LOCK is held (an e2e run in progress?); waiting up to ${LOCK_WAIT_S}s" >&2
    flock -w "$LOCK_WAIT_S" "$LOCK_FD" || { echo "testbed: $LOCK still held, gave up" >&2; exit 1; }
  fi
}

case "${1:-}" in
  up) lock_testbed; up ;;
  fleet-up) lock_testbed; fleet_up "${2:-3}" ;;
  fleet-routes) fleet_routes ;;
  bird) shift; bird_cmd "$@" ;;
  down) lock_testbed; down; log "down" ;;
  status) status ;;
  kernel-routes) kernel_routes "${2:-}" ;;
  service) lock_testbed; shift; service "$@" ;;
  *) echo "usage: $0 up|down|status|kernel-routes [IFACE]|service BACKEND server|decap stop|start" >&2
     echo "       $0 fleet-up [2|3]|fleet-routes|bird router|lb-a|lb-b|lb-c start|stop|birdc CMD..." >&2; exit 2 ;;
esac

// Which backend a health probe is for, by the probe's source port.
//
// Every probe (direct or tunnel) binds a port of this range, mapped here to
// its backend and to the peer it probes, so that the probe's replies reach
// the kernel on a budget of their own (pipeline.h, ToKernel).
//
// A `tunnel` health check (health_config.h, HealthCheckVia::kTunnel) makes the
// kernel interface's stack open a TCP or UDP connection to a VIP, from the
// LB's own address, with a source port of this reserved range. The data plane
// sends such a frame from the kernel (Worker::ProcessFromKernel) to the one
// backend the table says, encapsulated exactly like the VIP's data traffic
// (GRE, IP-in-IP or L2 DSR), so that a backend whose decapsulation or VIP
// setup is broken fails the check. The health task binds its probe sockets to
// these ports and maps each before it connects; every other frame from the
// kernel to a VIP leaves unchanged (the router sends it back to the LB, which
// balances it like anyone's).
//
// Lock-free: written by the control thread (Set, Clear), read by every
// worker. One 64-bit atomic a port for the mapping, so a reader sees a whole
// entry or none; the peer is three, whose torn read costs one frame's budget.
// Relaxed is enough: the health task sets a port before its connect(), and
// the probe's first frame then passes through the kernel and the tap's
// read(), each a full barrier, before a worker looks the port up.
#ifndef MAGLB_TUNNEL_PROBE_H_
#define MAGLB_TUNNEL_PROBE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>

namespace maglb {

/// The reserved source ports: just above Linux's default ephemeral range
/// (net.ipv4.ip_local_port_range 32768..60999), so the kernel's own
/// connections never pick one. An operator who widened that range should
/// add 61000-65095 to net.ipv4.ip_local_reserved_ports.
inline constexpr uint16_t kTunnelProbePortBase = 61000;
inline constexpr uint16_t kTunnelProbePorts = 4096;
static_assert(uint32_t{kTunnelProbePortBase} + kTunnelProbePorts <= 65536);

class TunnelProbeTable {
 public:
  /// A mapped port: the VIP and the backend (their stable ids, lb_state.h).
  struct Target {
    uint32_t vip_id = 0;
    uint32_t backend_id = 0;
    friend bool operator==(const Target&, const Target&) = default;
  };

  static constexpr bool Covers(uint16_t port) {
    return port >= kTunnelProbePortBase && port - kTunnelProbePortBase < kTunnelProbePorts;
  }

  /// Maps `port` to a tunnel probe's VIP and backend: its frames from the
  /// kernel are encapsulated toward that backend. False (nothing changes) when
  /// the port is outside the range or an id is 0 (never assigned: lb_state.h),
  /// which would read as unmapped. Direct probes are not mapped here.
  bool Set(uint16_t port, uint32_t vip_id, uint32_t backend_id) {
    if (!Covers(port) || vip_id == 0 || backend_id == 0) return false;
    slots_[port - kTunnelProbePortBase].store(uint64_t{vip_id} << 32 | backend_id,
                                               std::memory_order_relaxed);
    return true;
  }

  /// The peer (address and port) a probe from `port` goes to, direct or
  /// tunnel: replies from exactly that peer to that port reach the kernel on
  /// a budget of their own (pipeline.h), so that a flood to the LB's address
  /// cannot starve the checks. `address`: 4 bytes (IPv4) or 16, network order.
  void SetPeer(uint16_t port, const uint8_t* address, bool is_v6, uint16_t peer_port) {
    if (!Covers(port)) return;
    Peer& p = peers_[port - kTunnelProbePortBase];
    p.meta.store(0, std::memory_order_relaxed);  // a reader between the stores sees none
    p.hi.store(Word(address, 0, is_v6 ? 8 : 4), std::memory_order_relaxed);
    p.lo.store(is_v6 ? Word(address, 8, 8) : 0, std::memory_order_relaxed);
    p.meta.store(Meta(is_v6, peer_port), std::memory_order_relaxed);
  }

  /// A frame from `address`:`peer_port` to our `port` is the reply of the
  /// probe bound there. A torn read (the control thread changing the peer)
  /// only misplaces one frame's budget.
  bool IsPeer(uint16_t port, const uint8_t* address, bool is_v6, uint16_t peer_port) const {
    if (!Covers(port)) return false;
    const Peer& p = peers_[port - kTunnelProbePortBase];
    return p.meta.load(std::memory_order_relaxed) == Meta(is_v6, peer_port) &&
           p.hi.load(std::memory_order_relaxed) == Word(address, 0, is_v6 ? 8 : 4) &&
           p.lo.load(std::memory_order_relaxed) == (is_v6 ? Word(address, 8, 8) : 0);
  }

  void Clear(uint16_t port) {
    if (!Covers(port)) return;
    slots_[port - kTunnelProbePortBase].store(0, std::memory_order_relaxed);
    peers_[port - kTunnelProbePortBase].meta.store(0, std::memory_order_relaxed);
  }

  /// The port's target, if mapped.
  std::optional<Target> Get(uint16_t port) const {
    if (!Covers(port)) return std::nullopt;
    const uint64_t v = slots_[port - kTunnelProbePortBase].load(std::memory_order_relaxed);
    if (v == 0) return std::nullopt;
    return Target{static_cast<uint32_t>(v >> 32), static_cast<uint32_t>(v)};
  }

 private:
  struct Peer {
    std::atomic<uint64_t> hi{0}, lo{0};
    std::atomic<uint64_t> meta{0};  // 0: none
  };
  static uint64_t Word(const uint8_t* a, int from, int n) {
    uint64_t w = 0;
    for (int i = 0; i < n; ++i) w = w << 8 | a[from + i];
    return w;
  }
  static uint64_t Meta(bool is_v6, uint16_t port) {
    return uint64_t{1} << 32 | uint64_t{is_v6} << 16 | port;
  }

  // 0: unmapped (ids are never 0).
  std::array<std::atomic<uint64_t>, kTunnelProbePorts> slots_{};
  std::array<Peer, kTunnelProbePorts> peers_{};
};

}  // namespace maglb

#endif  // MAGLB_TUNNEL_PROBE_H_

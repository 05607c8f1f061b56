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
// worker. One 64-bit atomic a port, so a reader sees a whole entry or none.
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

  /// Maps `port`. False (nothing changes) when the port is outside the range
  /// or an id is 0 (never assigned: lb_state.h), which would read as unmapped.
  /// `peer` (PeerKey of the address and port the probe goes to) says which
  /// replies to this port are the probe's: they reach the kernel on a budget
  /// of their own, so that a flood to the LB's address cannot starve them.
  bool Set(uint16_t port, uint32_t vip_id, uint32_t backend_id, uint64_t peer = 0) {
    if (!Covers(port) || vip_id == 0 || backend_id == 0) return false;
    peers_[port - kTunnelProbePortBase].store(peer, std::memory_order_relaxed);
    slots_[port - kTunnelProbePortBase].store(uint64_t{vip_id} << 32 | backend_id,
                                               std::memory_order_relaxed);
    return true;
  }

  void Clear(uint16_t port) {
    if (!Covers(port)) return;
    slots_[port - kTunnelProbePortBase].store(0, std::memory_order_relaxed);
    peers_[port - kTunnelProbePortBase].store(0, std::memory_order_relaxed);
  }

  /// The probe peer a port expects replies from (0: none).
  uint64_t Peer(uint16_t port) const {
    return Covers(port) ? peers_[port - kTunnelProbePortBase].load(std::memory_order_relaxed) : 0;
  }

  /// A probe's peer as one word: its address (16 bytes for IPv6, 4 for IPv4,
  /// in network order) folded, and its port. Not a secret: a reply must come
  /// from exactly the address and port probed to be counted as the probe's.
  static uint64_t PeerKey(const uint8_t* address, bool is_v6, uint16_t port) {
    uint64_t a = 0, b = 0;
    for (int i = 0; i < 8 && i < (is_v6 ? 16 : 4); ++i) a = a << 8 | address[i];
    for (int i = 8; i < (is_v6 ? 16 : 0); ++i) b = b << 8 | address[i];
    const uint64_t key = (a * 0x9E3779B97F4A7C15ull) ^ (b * 0xC2B2AE3D27D4EB4Full) ^
                         (uint64_t{port} << 1 | (is_v6 ? 1u : 0u));
    return key == 0 ? 1 : key;  // 0 reads as "none"
  }

  /// The port's target, if mapped.
  std::optional<Target> Get(uint16_t port) const {
    if (!Covers(port)) return std::nullopt;
    const uint64_t v = slots_[port - kTunnelProbePortBase].load(std::memory_order_relaxed);
    if (v == 0) return std::nullopt;
    return Target{static_cast<uint32_t>(v >> 32), static_cast<uint32_t>(v)};
  }

 private:
  // 0: unmapped (ids are never 0).
  std::array<std::atomic<uint64_t>, kTunnelProbePorts> slots_{};
  std::array<std::atomic<uint64_t>, kTunnelProbePorts> peers_{};
};

}  // namespace maglb

#endif  // MAGLB_TUNNEL_PROBE_H_

// The flow hash: which slot of a VIP's table (hence which backend) a flow maps to.
//
// The hash is XXH64 (the xxHash 64-bit specification, as maglb::Xxh64 in
// hash.h) over the 40 bytes of a FlowKey, with a 64-bit seed:
//
//   FlowHash(key, seed) == Xxh64(&key, sizeof(FlowKey), seed)
//
// bit for bit, where the 40 bytes are the FlowKey as laid out on a
// little-endian host: src[16], dst[16], src_port and dst_port as 2-byte
// little-endian integers, protocol, is_v6, 2 zero bytes. A big-endian host
// computes the same value (FlowHash composes the ports arithmetically). FlowKey holds both addresses in full (IPv6's
// 128 bits, IPv4 in the first 4 bytes with zeros after), the ports in host
// order, the protocol and the family flag; the layout is fixed (flow.h), so the
// hash is identical across processes, hosts, builds and versions. Every LB
// instance of a deployment uses the same seed (LbConfig::hash_seed), so a flow
// hashes the same wherever ECMP sends it.
//
// FlowHash is the fixed-length specialisation: one 32-byte stripe, one 8-byte
// tail, the standard avalanche; little-endian loads, no loops, no branches, a
// few ns. The full avalanche matters because LookupTable::SlotOf uses the HIGH
// 32 bits; tests/unit/flow_hash_test.cc checks their uniformity on realistic
// address sets and pins a golden value so that an accidental change fails.
#ifndef MAGLB_FLOW_HASH_H_
#define MAGLB_FLOW_HASH_H_

#include <bit>
#include <cstdint>
#include <cstring>

#include "maglb/flow.h"
#include "maglb/xxh64_internal.h"

namespace maglb {

/// XXH64(key bytes, 40, seed). See the file comment.
inline uint64_t FlowHash(const FlowKey& key, uint64_t seed) {
  using namespace xxh64_internal;  // NOLINT: the XXH64 primitives
  const auto* p = reinterpret_cast<const uint8_t*>(&key);
  uint64_t v1 = Round(seed + kP1 + kP2, LoadLe64(p));
  uint64_t v2 = Round(seed + kP2, LoadLe64(p + 8));
  uint64_t v3 = Round(seed, LoadLe64(p + 16));
  uint64_t v4 = Round(seed - kP1, LoadLe64(p + 24));
  uint64_t h = std::rotl(v1, 1) + std::rotl(v2, 7) + std::rotl(v3, 12) + std::rotl(v4, 18);
  h = MergeRound(h, v1);
  h = MergeRound(h, v2);
  h = MergeRound(h, v3);
  h = MergeRound(h, v4);
  h += sizeof(FlowKey);
  // The last 8 bytes from the fields, not the memory, so that the host-order
  // ports hash the same on big-endian hosts (as their little-endian layout).
  const uint64_t tail = uint64_t{key.src_port} | uint64_t{key.dst_port} << 16 |
                        uint64_t{key.protocol} << 32 | uint64_t{key.is_v6} << 40 |
                        uint64_t{key.reserved} << 48;
  return Avalanche(Tail8(h, tail));
}

namespace flow_hash_internal {
// 64x64->128 multiply folded to 64 bits (the "mum" of wyhash/rapidhash).
inline uint64_t Mum(uint64_t a, uint64_t b) {
  const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}
}  // namespace flow_hash_internal

/// The secret of a conntrack hash: one 64-bit word per input word, two more
/// for the fold. Chosen at start-up (RandomConntrackKey, getrandom(2)) for
/// each worker's table; tests and benchmarks may use a fixed one.
struct ConntrackKey {
  uint64_t k[7];
  /// A fixed key derived from `seed` (splitmix64): tests and benchmarks only.
  static constexpr ConntrackKey Fixed(uint64_t seed) {
    ConntrackKey key{};
    for (uint64_t& w : key.k) {
      seed += 0x9E3779B97F4A7C15ULL;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
      w = z ^ (z >> 31);
    }
    return key;
  }
};

/// A key from the kernel's random source (getrandom(2)); false if the
/// kernel could not supply one (the caller refuses to start).
bool RandomConntrackKey(ConntrackKey* key);

/// The connection-tracking hash of a flow: which conntrack buckets it uses,
/// and the per-flow value that varies the outer source of encapsulated
/// packets. It decides no placement, so it is not XXH64: it runs on every
/// packet, and four 64x64->128 multiplies (wyhash's folded multiply over
/// the five 64-bit words of the key) cost a third of XXH64's ~25 cycles.
///
/// Keyed: every input word is xored with its own secret word before it is
/// multiplied, so nobody outside the process can tell which sources zero a
/// product, or which flows share buckets (with public constants, one IPv6
/// interface id zeroed the first multiply and every /64 prefix with it
/// hashed alike; 16 chosen flows evicted a live one). The key is per worker
/// and per start: the conntrack is local to its worker and forgotten on
/// restart, unlike FlowHash, which must agree across instances.
inline uint64_t ConntrackHash(const FlowKey& key, const ConntrackKey& secret) {
  using flow_hash_internal::Mum;
  using xxh64_internal::LoadLe64;
  const uint64_t* s = secret.k;
  const auto* p = reinterpret_cast<const uint8_t*>(&key);
  const uint64_t tail = uint64_t{key.src_port} | uint64_t{key.dst_port} << 16 |
                        uint64_t{key.protocol} << 32 | uint64_t{key.is_v6} << 40 |
                        uint64_t{key.reserved} << 48;
  const uint64_t a = Mum(LoadLe64(p) ^ s[0], LoadLe64(p + 8) ^ s[1]);
  const uint64_t b = Mum(LoadLe64(p + 16) ^ s[2], LoadLe64(p + 24) ^ s[3]);
  const uint64_t c = Mum(a ^ s[4], tail ^ s[5]);
  // b enters the last multiply with c on the other side: a zero b (one
  // chance in 2^64 per flow without the key) still leaves c.
  return Mum(b ^ c ^ s[6], c ^ s[4]);
}

}  // namespace maglb

#endif  // MAGLB_FLOW_HASH_H_

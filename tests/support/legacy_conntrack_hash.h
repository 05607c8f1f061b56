// The conntrack hash before issue 8 keyed it (fixed public constants), kept
// for the tests that replay the attacks it allowed and as the benchmarks'
// baseline. Never used by maglb itself.
#ifndef MAGLB_TESTS_SUPPORT_LEGACY_CONNTRACK_HASH_H_
#define MAGLB_TESTS_SUPPORT_LEGACY_CONNTRACK_HASH_H_

#include <cstdint>

#include "maglb/flow.h"
#include "maglb/flow_hash.h"
#include "maglb/xxh64_internal.h"

namespace maglb::testing {

inline uint64_t LegacyConntrackHash(const FlowKey& key) {
  using flow_hash_internal::Mum;
  using xxh64_internal::LoadLe64;
  constexpr uint64_t kS0 = 0xa0761d6478bd642fULL, kS1 = 0xe7037ed1a0b428dbULL,
                     kS2 = 0x8ebc6af09c88c6e3ULL, kS3 = 0x589965cc75374cc3ULL,
                     kS4 = 0x1d8e4e27c47d124fULL;
  const auto* p = reinterpret_cast<const uint8_t*>(&key);
  const uint64_t tail = uint64_t{key.src_port} | uint64_t{key.dst_port} << 16 |
                        uint64_t{key.protocol} << 32 | uint64_t{key.is_v6} << 40 |
                        uint64_t{key.reserved} << 48;
  const uint64_t a = Mum(LoadLe64(p) ^ kS0, LoadLe64(p + 8) ^ kS1);
  const uint64_t b = Mum(LoadLe64(p + 16) ^ kS2, LoadLe64(p + 24) ^ kS3);
  const uint64_t c = Mum(a ^ b ^ kS4, tail ^ kS1);
  return Mum(c ^ kS0, c ^ kS3);
}

}  // namespace maglb::testing

#endif  // MAGLB_TESTS_SUPPORT_LEGACY_CONNTRACK_HASH_H_

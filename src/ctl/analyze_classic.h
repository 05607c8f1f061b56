// `maglbctl analyze --classic`: the textbook experiments (keys onto servers
// "S<i>", the classic recipe's hash), reproducible against published tables.
#ifndef MAGLB_CTL_ANALYZE_CLASSIC_H_
#define MAGLB_CTL_ANALYZE_CLASSIC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "maglb/hashing.h"
#include "report.h"

namespace maglb::analyze {

// The recipe in words, the first note of every classic table.
extern const char kClassicRecipeNote[];

struct ClassicKey {
  std::string text;
  uint32_t hash;  // ClassicHash32(text)
};

// The recipe's first `n` keys with their hashes.
std::vector<ClassicKey> MakeKeys(size_t n);

// A ring of `points` points per server; server s is "S<s>".
HashRing ClassicRing(const std::vector<uint32_t>& servers, uint32_t points);

// Server indices 0..n-1.
std::vector<uint32_t> Range(uint32_t n);

// The keys that move when server N joins N servers 0..N-1.
report::Table AddServerExperiment(const std::vector<ClassicKey>& keys, uint32_t n,
                                  uint32_t ring_points);
// The keys that move when the last, then a middle one, of N servers leaves.
report::Table RemoveServerExperiment(const std::vector<ClassicKey>& keys, uint32_t n,
                                     uint32_t ring_points);
// How evenly each scheme spreads the keys over N servers.
report::Table KeyBalanceExperiment(const std::vector<ClassicKey>& keys, uint32_t n);

}  // namespace maglb::analyze

#endif  // MAGLB_CTL_ANALYZE_CLASSIC_H_

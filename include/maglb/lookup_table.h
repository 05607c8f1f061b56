// The table format that the packet path reads, whatever scheme built it.
#ifndef MAGLB_LOOKUP_TABLE_H_
#define MAGLB_LOOKUP_TABLE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace maglb {

/// One backend as the table builders see it: an identity and a weight.
/// Placement depends only on the set of (name, weight), never on the order.
struct BackendSpec {
  std::string name;
  uint32_t weight = 1;  // 0 = draining: keeps its flows, gets no new ones
};

/// The backends' names in list order: what a LookupTable's indices name.
std::vector<std::string> BackendNames(std::span<const BackendSpec> backends);

/// An immutable, prime-sized table of backend indices. Slot s holds an index
/// into the backend list that the table was built from (in that list's order,
/// so the caller maps indices back to its own backends).
///
/// Lookup maps a 64-bit flow hash to a slot with a multiply-shift ("fastrange")
/// on the hash's high 32 bits, (h >> 32) * M >> 32, instead of h % M: no
/// division on the packet path, and every slot covers 2^32/M ± 1 hash values.
class LookupTable {
 public:
  static constexpr uint16_t kMaxBackends = 0xFFFF;  // slot entries are uint16_t

  LookupTable() = default;
  /// `slots` must be non-empty and every entry < backend_names.size().
  LookupTable(std::vector<uint16_t> slots, std::vector<std::string> backend_names);
  /// What a builder may know already, so that the constructor does not work
  /// it out again. Each part is exactly right or empty (one of the wrong
  /// length is ignored).
  struct Known {
    std::span<const uint64_t> name_hashes;  // [i]: NameHash(backend_names[i])
    std::span<const uint8_t> owns;          // [i]: 1 if backend i holds a slot, else 0
  };
  LookupTable(std::vector<uint16_t> slots, std::vector<std::string> backend_names, Known known);
  /// The hash of a name that orders the fingerprint's names: Xxh64 with
  /// kNameHashSeed.
  static constexpr uint64_t kNameHashSeed = 0x6d61676c622d6670ULL;  // "maglb-fp"
  static uint64_t NameHash(std::string_view name);

  /// True when the table has no slots: every backend weighs 0 (or none exist),
  /// so new flows have nowhere to go.
  bool empty() const { return slots_.empty(); }
  uint32_t size() const { return static_cast<uint32_t>(slots_.size()); }

  /// Backend index for a flow hash. Requires !empty().
  uint16_t Lookup(uint64_t flow_hash) const {
    return slots_[SlotOf(flow_hash, size())];
  }
  static uint32_t SlotOf(uint64_t flow_hash, uint32_t m) {
    return static_cast<uint32_t>(((flow_hash >> 32) * m) >> 32);
  }

  uint16_t slot(uint32_t s) const { return slots_[s]; }
  const std::vector<uint16_t>& slots() const { return slots_; }
  const std::vector<std::string>& backend_names() const { return backend_names_; }

  /// Entries per backend index.
  std::vector<uint32_t> EntryCounts() const;

  /// 64-bit fingerprint of the table's contents: XXH64 over M, the names that
  /// own slots (length-prefixed, in ascending order of their XXH64, ties by
  /// bytes) and, slot by slot, the rank of the name in that slot. Two instances whose tables route every slot to the
  /// same names have equal fingerprints, however they list their backends
  /// (draining ones included). 0 for an empty table.
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  std::vector<uint16_t> slots_;
  std::vector<std::string> backend_names_;
  uint64_t fingerprint_ = 0;
};

}  // namespace maglb

#endif  // MAGLB_LOOKUP_TABLE_H_

#include "maglb/toeplitz.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "maglb/packet.h"

namespace maglb {

uint32_t ToeplitzHash(std::span<const uint8_t> key, std::span<const uint8_t> input) {
  // For every set input bit (most significant first), XOR in the 32 key bits
  // that start at that bit position. `window` holds the next 64 key bits, its
  // top 32 the current ones; a key byte is shifted in after each input byte.
  if (key.size() < 4) return 0;
  const size_t bytes = std::min(input.size(), key.size() - 4);
  uint64_t window = 0;
  for (size_t i = 0; i < 8; ++i) window = window << 8 | (i < key.size() ? key[i] : 0);
  uint32_t hash = 0;
  for (size_t i = 0; i < bytes; ++i) {
    const uint8_t byte = input[i];
    for (int bit = 7; bit >= 0; --bit) {
      if ((byte >> bit) & 1) hash ^= static_cast<uint32_t>(window >> (32 - (7 - bit)));
    }
    const size_t next = i + 8;
    window = window << 8 | (next < key.size() ? key[next] : 0);
  }
  return hash;
}

uint32_t RssHash(const RssConfig& rss, const FlowKey& flow) {
  const bool v6 = flow.is_v6 != 0;
  const RssHashTypes& t = rss.types;
  const bool tcp = flow.protocol == kIpProtoTcp, udp = flow.protocol == kIpProtoUdp;
  const bool l4 = v6 ? (tcp && t.ipv6_tcp) || (udp && t.ipv6_udp) : (tcp && t.ipv4_tcp) || (udp && t.ipv4_udp);
  if (!l4 && !(v6 ? t.ipv6 : t.ipv4)) return 0;
  const size_t addr = v6 ? 16 : 4;
  uint8_t in[kRssMaxInputLen];
  std::memcpy(in, flow.src.data(), addr);
  std::memcpy(in + addr, flow.dst.data(), addr);
  size_t len = 2 * addr;
  if (l4) {
    in[len++] = static_cast<uint8_t>(flow.src_port >> 8);
    in[len++] = static_cast<uint8_t>(flow.src_port);
    in[len++] = static_cast<uint8_t>(flow.dst_port >> 8);
    in[len++] = static_cast<uint8_t>(flow.dst_port);
  }
  return ToeplitzHash(rss.key, {in, len});
}

absl::StatusOr<RssOwner> RssOwner::Create(RssConfig rss, uint32_t workers) {
  if (rss.key.size() < kRssMaxInputLen + 4) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "RSS key of %u bytes: too short for IPv6 4-tuples (needs %u)", rss.key.size(), kRssMaxInputLen + 4));
  }
  if (rss.reta.empty()) return absl::InvalidArgumentError("empty RSS indirection table");
  return RssOwner(std::move(rss), workers);
}

uint32_t RssOwner::OwnerOf(const FlowKey& flow) const {
  const uint16_t queue = rss_.reta[RssHash(rss_, flow) % rss_.reta.size()];
  return queue < workers_ ? queue : kUnknown;
}

}  // namespace maglb

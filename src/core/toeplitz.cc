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
    // Branch-free: input bits are random, a branch on each mispredicts half
    // the time (measured: 2x the cost of the whole hash).
    for (int k = 0; k < 8; ++k) {
      const uint32_t take = 0u - ((byte >> (7 - k)) & 1u);
      hash ^= static_cast<uint32_t>(window >> (32 - k)) & take;
    }
    const size_t next = i + 8;
    window = window << 8 | (next < key.size() ? key[next] : 0);
  }
  return hash;
}

namespace {

// The bytes the NIC hashes for `flow`'s packets; 0 when it hashes none.
size_t RssInput(const RssConfig& rss, const FlowKey& flow, uint8_t* in) {
  const bool v6 = flow.is_v6 != 0;
  const RssHashTypes& t = rss.types;
  const bool tcp = flow.protocol == kIpProtoTcp, udp = flow.protocol == kIpProtoUdp;
  // Ports 0 and 0: a fragment's key (packet.h); NICs hash fragments on
  // their addresses, having no ports to read.
  const bool ports = flow.src_port != 0 || flow.dst_port != 0;
  const bool l4 = ports && (v6 ? (tcp && t.ipv6_tcp) || (udp && t.ipv6_udp)
                               : (tcp && t.ipv4_tcp) || (udp && t.ipv4_udp));
  if (!l4 && !(v6 ? t.ipv6 : t.ipv4)) return 0;
  const size_t addr = v6 ? 16 : 4;
  std::memcpy(in, flow.src.data(), addr);
  std::memcpy(in + addr, flow.dst.data(), addr);
  size_t len = 2 * addr;
  if (l4) {
    in[len++] = static_cast<uint8_t>(flow.src_port >> 8);
    in[len++] = static_cast<uint8_t>(flow.src_port);
    in[len++] = static_cast<uint8_t>(flow.dst_port >> 8);
    in[len++] = static_cast<uint8_t>(flow.dst_port);
  }
  return len;
}

}  // namespace

uint32_t RssHash(const RssConfig& rss, const FlowKey& flow) {
  uint8_t in[kRssMaxInputLen];
  const size_t len = RssInput(rss, flow, in);
  return len == 0 ? 0 : ToeplitzHash(rss.key, {in, len});
}

absl::StatusOr<RssOwner> RssOwner::Create(RssConfig rss, uint32_t workers) {
  if (rss.key.size() < kRssMaxInputLen + 4) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "RSS key of %u bytes: too short for IPv6 4-tuples (needs %u)", rss.key.size(), kRssMaxInputLen + 4));
  }
  if (rss.reta.empty()) return absl::InvalidArgumentError("empty RSS indirection table");
  RssOwner owner(std::move(rss), workers);
  // The hash is linear over the input bits: a nibble's share is the hash of
  // an input holding only that nibble.
  for (size_t j = 0; j < 2 * kRssMaxInputLen; ++j) {
    for (uint8_t v = 0; v < 16; ++v) {
      uint8_t in[kRssMaxInputLen] = {};
      in[j / 2] = static_cast<uint8_t>(j % 2 == 0 ? v << 4 : v);
      owner.nibbles_[j][v] = ToeplitzHash(owner.rss_.key, {in, j / 2 + 1});
    }
  }
  return owner;
}

uint32_t RssOwner::Hash(const FlowKey& flow) const {
  uint8_t in[kRssMaxInputLen];
  const size_t len = RssInput(rss_, flow, in);
  uint32_t hash = 0;
  for (size_t i = 0; i < len; ++i) hash ^= nibbles_[2 * i][in[i] >> 4] ^ nibbles_[2 * i + 1][in[i] & 0xF];
  return hash;
}

uint32_t RssOwner::OwnerOf(const FlowKey& flow) const {
  const uint16_t queue = rss_.reta[Hash(flow) % rss_.reta.size()];
  return queue < workers_ ? queue : kUnknown;
}

}  // namespace maglb

#include "maglb/checksum.h"

#include <bit>
#include <cstring>

namespace maglb {
namespace {

uint32_t Fold16(uint64_t s) {
  s = (s & 0xFFFFFFFF) + (s >> 32);
  s = (s & 0xFFFFFFFF) + (s >> 32);
  s = (s & 0xFFFF) + (s >> 16);
  s = (s & 0xFFFF) + (s >> 16);
  return static_cast<uint32_t>(s);
}

// The one's-complement sum does not depend on byte order (RFC 1071 2(B)):
// summing native-order words and swapping the folded result gives the
// big-endian sum. So the loop loads whole 32-bit words, unaligned-safe via
// memcpy, instead of assembling 16-bit values byte by byte.
uint32_t ToNative(uint32_t be16) {
  if constexpr (std::endian::native == std::endian::little) {
    return static_cast<uint16_t>(be16 << 8 | be16 >> 8);
  }
  return be16;
}

}  // namespace

uint32_t ChecksumPartial(const uint8_t* data, size_t len, uint32_t sum) {
  uint64_t s = ToNative(Fold16(sum));
  while (len >= 16) {
    uint32_t w[4];
    std::memcpy(w, data, 16);
    s += uint64_t{w[0]} + w[1] + w[2] + w[3];
    data += 16;
    len -= 16;
  }
  while (len >= 4) {
    uint32_t w;
    std::memcpy(&w, data, 4);
    s += w;
    data += 4;
    len -= 4;
  }
  if (len >= 2) {
    uint16_t w;
    std::memcpy(&w, data, 2);
    s += w;
    data += 2;
    len -= 2;
  }
  if (len != 0) {
    const uint8_t last[2] = {data[0], 0};  // an odd byte is padded with zero
    uint16_t w;
    std::memcpy(&w, last, 2);
    s += w;
  }
  return ToNative(Fold16(s));
}

uint32_t Ipv6PseudoHeaderSum(const uint8_t* src, const uint8_t* dst, uint32_t upper_len,
                             uint8_t next_header) {
  uint32_t sum = ChecksumPartial(src, 16, 0);
  sum = ChecksumPartial(dst, 16, sum);
  sum += (upper_len >> 16) + (upper_len & 0xFFFF) + next_header;
  return Fold16(sum);
}

}  // namespace maglb

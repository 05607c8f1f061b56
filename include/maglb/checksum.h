// The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
#ifndef MAGLB_CHECKSUM_H_
#define MAGLB_CHECKSUM_H_

#include <cstddef>
#include <cstdint>

namespace maglb {

/// One's-complement sum of `len` bytes (big-endian 16-bit words, an odd last
/// byte padded with zero), added to `sum`, not folded. Chain calls to sum
/// discontiguous pieces, each but the last of even length.
uint32_t ChecksumPartial(const uint8_t* data, size_t len, uint32_t sum);

/// Folds a partial sum to 16 bits and complements it: the value to store
/// (host order; store it big-endian).
inline uint16_t ChecksumFinish(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

/// Checksum of one contiguous region (host order).
inline uint16_t InternetChecksum(const uint8_t* data, size_t len) {
  return ChecksumFinish(ChecksumPartial(data, len, 0));
}

/// Partial sum of the IPv6 pseudo-header (RFC 8200 8.1): source, destination,
/// upper-layer length, next header.
uint32_t Ipv6PseudoHeaderSum(const uint8_t* src, const uint8_t* dst, uint32_t upper_len,
                             uint8_t next_header);

}  // namespace maglb

#endif  // MAGLB_CHECKSUM_H_

#include "maglb/checksum.h"

namespace maglb {

uint32_t ChecksumPartial(const uint8_t* data, size_t len, uint32_t sum) {
  // 64-bit accumulator: no carry handling inside the loop (2^48 words before
  // it could overflow), one fold at the end.
  uint64_t s = sum;
  while (len >= 8) {
    s += (uint32_t{data[0]} << 8 | data[1]) + (uint32_t{data[2]} << 8 | data[3]) +
         (uint32_t{data[4]} << 8 | data[5]) + (uint32_t{data[6]} << 8 | data[7]);
    data += 8;
    len -= 8;
  }
  while (len >= 2) {
    s += uint32_t{data[0]} << 8 | data[1];
    data += 2;
    len -= 2;
  }
  if (len != 0) s += uint32_t{data[0]} << 8;
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<uint32_t>(s);
}

uint32_t Ipv6PseudoHeaderSum(const uint8_t* src, const uint8_t* dst, uint32_t upper_len,
                             uint8_t next_header) {
  uint32_t sum = ChecksumPartial(src, 16, 0);
  sum = ChecksumPartial(dst, 16, sum);
  sum += (upper_len >> 16) + (upper_len & 0xFFFF) + next_header;
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return sum;
}

}  // namespace maglb

// Big-endian loads and stores on byte pointers, for the packet code. Private
// to src/core: byte-wise, so alignment never matters and no type punning.
#ifndef MAGLB_SRC_CORE_WIRE_H_
#define MAGLB_SRC_CORE_WIRE_H_

#include <cstdint>

namespace maglb::wire {

inline uint16_t Load16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
inline uint32_t Load32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}
inline void Store16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void Store32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

}  // namespace maglb::wire

#endif  // MAGLB_SRC_CORE_WIRE_H_

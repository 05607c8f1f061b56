// A frame in a buffer with headroom and tailroom, as an mbuf holds it, with
// the PacketRef the pipeline reads and writes: what the pipeline-level tests
// hand to Worker.
#ifndef MAGLB_TESTS_SUPPORT_PACKET_BUF_H_
#define MAGLB_TESTS_SUPPORT_PACKET_BUF_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "maglb/pipeline.h"

namespace maglb::testing {

struct PacketBuf {
  static constexpr size_t kHeadroom = 128;
  static constexpr size_t kTailroom = 256;

  explicit PacketBuf(const std::vector<uint8_t>& frame) : storage(kHeadroom + frame.size() + kTailroom) {
    std::memcpy(storage.data() + kHeadroom, frame.data(), frame.size());
    ref.data = storage.data() + kHeadroom;
    ref.len = static_cast<uint16_t>(frame.size());
    ref.headroom = kHeadroom;
    ref.tailroom = kTailroom;
  }
  /// The frame the pipeline left: out_len bytes at offset.
  std::vector<uint8_t> Out() const {
    const uint8_t* p = ref.data + ref.offset;
    return std::vector<uint8_t>(p, p + ref.out_len);
  }

  std::vector<uint8_t> storage;
  PacketRef ref;
};

}  // namespace maglb::testing

#endif  // MAGLB_TESTS_SUPPORT_PACKET_BUF_H_

// A pcap file (v2.4, Ethernet) of whole frames, for tests that hand frames
// to a dissector or to DPDK's net_pcap.
#ifndef MAGLB_TESTS_SUPPORT_PCAP_WRITER_H_
#define MAGLB_TESTS_SUPPORT_PCAP_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace maglb::testing {

class PcapWriter {
 public:
  explicit PcapWriter(const char* path) : f_(std::fopen(path, "wb")) {
    if (f_ == nullptr) return;
    const uint32_t hdr[6] = {0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1};  // v2.4, LINKTYPE_ETHERNET
    std::fwrite(hdr, sizeof(hdr), 1, f_);
  }
  ~PcapWriter() {
    if (f_ != nullptr) std::fclose(f_);
  }
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  bool ok() const { return f_ != nullptr; }
  void Write(const uint8_t* data, size_t len) {
    const uint32_t rec[4] = {count_++, 0, static_cast<uint32_t>(len), static_cast<uint32_t>(len)};
    std::fwrite(rec, sizeof(rec), 1, f_);
    std::fwrite(data, len, 1, f_);
  }
  void Write(const std::vector<uint8_t>& b) { Write(b.data(), b.size()); }
  uint32_t count() const { return count_; }

 private:
  std::FILE* f_;
  uint32_t count_ = 0;
};

}  // namespace maglb::testing

#endif  // MAGLB_TESTS_SUPPORT_PCAP_WRITER_H_

// A pcap file read whole into memory, for bench/pktgen: the classic libpcap
// format (microsecond or nanosecond timestamps, either byte order), Ethernet
// link type only. No DPDK, so that the parser is unit-tested on its own
// (bench/pcap_reader_test.cc).
#ifndef MAGLB_BENCH_PCAP_READER_H_
#define MAGLB_BENCH_PCAP_READER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace maglb::bench {

/// The largest frame accepted: a 9216-byte jumbo MTU plus Ethernet, VLAN
/// tags and FCS. Larger records are refused, not cut: the generator would
/// otherwise send something the file does not hold.
inline constexpr uint32_t kMaxPcapFrame = 9216 + 14 + 8 + 4;
/// The smallest: an Ethernet header.
inline constexpr uint32_t kMinPcapFrame = 14;

struct PcapFrame {
  uint64_t offset = 0;  ///< into PcapFile::data
  uint32_t length = 0;  ///< bytes captured (what is sent)
};

struct PcapFile {
  std::vector<uint8_t> data;
  std::vector<PcapFrame> frames;
  uint32_t max_length = 0;
  /// Records whose capture is shorter than the frame on the wire (snaplen):
  /// only the captured bytes are there to send.
  uint64_t truncated = 0;

  std::span<const uint8_t> Frame(size_t i) const {
    return {data.data() + frames[i].offset, frames[i].length};
  }
};

/// Parses a pcap file's bytes. Errors name the record and its byte offset.
absl::StatusOr<PcapFile> ParsePcap(std::vector<uint8_t> bytes);
/// Reads `path` and parses it; errors name the file.
absl::StatusOr<PcapFile> ReadPcap(const std::string& path);

}  // namespace maglb::bench

#endif  // MAGLB_BENCH_PCAP_READER_H_

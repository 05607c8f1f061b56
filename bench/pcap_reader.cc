#include "pcap_reader.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/strings/str_format.h"

namespace maglb::bench {
namespace {

constexpr uint32_t kMagicMicro = 0xA1B2C3D4;
constexpr uint32_t kMagicNano = 0xA1B23C4D;
constexpr uint32_t kMagicPcapng = 0x0A0D0D0A;  // a section header block, read either way
constexpr uint32_t kLinkTypeEthernet = 1;
constexpr size_t kFileHeaderBytes = 24;
constexpr size_t kRecordHeaderBytes = 16;

uint32_t Load32(const uint8_t* p, bool swapped) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return swapped ? __builtin_bswap32(v) : v;
}

}  // namespace

absl::StatusOr<PcapFile> ParsePcap(std::vector<uint8_t> bytes) {
  if (bytes.size() < kFileHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%u bytes: shorter than a pcap file header (24 bytes)", bytes.size()));
  }
  const uint8_t* p = bytes.data();
  const uint32_t magic = Load32(p, false);
  bool swapped;
  if (magic == kMagicMicro || magic == kMagicNano) {
    swapped = false;
  } else if (magic == __builtin_bswap32(kMagicMicro) || magic == __builtin_bswap32(kMagicNano)) {
    swapped = true;
  } else if (magic == kMagicPcapng) {
    return absl::InvalidArgumentError(
        "a pcapng file: only the classic pcap format is read (convert: editcap -F pcap IN OUT)");
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("not a pcap file: magic 0x%08x at byte 0", magic));
  }
  // The link type is the low 16 bits; the high ones carry FCS flags in
  // newer writers.
  const uint32_t link_type = Load32(p + 20, swapped) & 0xFFFF;
  if (link_type != kLinkTypeEthernet) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "link type %u at byte 20: only Ethernet (1) frames can be sent on a port", link_type));
  }
  PcapFile file;
  size_t at = kFileHeaderBytes;
  while (at < bytes.size()) {
    const size_t record = file.frames.size();
    if (bytes.size() - at < kRecordHeaderBytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "record %u at byte %u: truncated header (%u of 16 bytes)", record, at, bytes.size() - at));
    }
    const uint32_t captured = Load32(p + at + 8, swapped);
    const uint32_t on_wire = Load32(p + at + 12, swapped);
    if (captured > kMaxPcapFrame) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "record %u at byte %u: %u captured bytes, more than the largest frame sent (%u)", record,
          at, captured, kMaxPcapFrame));
    }
    if (captured < kMinPcapFrame) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "record %u at byte %u: %u captured bytes, shorter than an Ethernet header", record, at,
          captured));
    }
    if (captured > on_wire) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "record %u at byte %u: %u bytes captured of a %u-byte frame (captured cannot exceed the "
          "frame)",
          record, at, captured, on_wire));
    }
    at += kRecordHeaderBytes;
    if (bytes.size() - at < captured) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "record %u at byte %u: truncated frame (%u of %u bytes)", record,
          at - kRecordHeaderBytes, bytes.size() - at, captured));
    }
    file.frames.push_back({at, captured});
    if (captured > file.max_length) file.max_length = captured;
    if (captured < on_wire) ++file.truncated;
    at += captured;
  }
  if (file.frames.empty()) return absl::InvalidArgumentError("no packets in the file");
  file.data = std::move(bytes);
  return file;
}

absl::StatusOr<PcapFile> ReadPcap(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrFormat("%s: %s", path, std::strerror(errno)));
  }
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), f.get())) > 0) {
    bytes.insert(bytes.end(), chunk, chunk + n);
  }
  if (std::ferror(f.get())) {
    return absl::DataLossError(absl::StrFormat("%s: read failed: %s", path, std::strerror(errno)));
  }
  absl::StatusOr<PcapFile> file = ParsePcap(std::move(bytes));
  if (!file.ok()) {
    return absl::Status(file.status().code(),
                        absl::StrFormat("%s: %s", path, file.status().message()));
  }
  return file;
}

}  // namespace maglb::bench

// The pcap reader of bench/pktgen on good files and on every field of a
// hostile or careless one.
#include "pcap_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

namespace maglb::bench {
namespace {

using ::testing::HasSubstr;

void Put32(std::vector<uint8_t>* out, uint32_t v, bool big_endian) {
  for (int i = 0; i < 4; ++i) {
    const int shift = big_endian ? 24 - 8 * i : 8 * i;
    out->push_back(static_cast<uint8_t>(v >> shift));
  }
}

void Put16(std::vector<uint8_t>* out, uint16_t v, bool big_endian) {
  out->push_back(static_cast<uint8_t>(big_endian ? v >> 8 : v));
  out->push_back(static_cast<uint8_t>(big_endian ? v : v >> 8));
}

std::vector<uint8_t> Header(uint32_t magic = 0xA1B2C3D4, uint32_t link = 1, bool big = false) {
  std::vector<uint8_t> h;
  Put32(&h, magic, big);
  Put16(&h, 2, big);
  Put16(&h, 4, big);
  Put32(&h, 0, big);
  Put32(&h, 0, big);
  Put32(&h, 65535, big);
  Put32(&h, link, big);
  return h;
}

// A record of `captured` bytes (each the byte `fill`) of a frame of `on_wire`.
void Record(std::vector<uint8_t>* out, uint32_t captured, uint32_t on_wire, uint8_t fill,
            bool big = false) {
  Put32(out, 1, big);
  Put32(out, 2, big);
  Put32(out, captured, big);
  Put32(out, on_wire, big);
  out->insert(out->end(), captured, fill);
}

TEST(PcapReader, ReadsFramesInOrder) {
  std::vector<uint8_t> f = Header();
  Record(&f, 60, 60, 0xAA);
  Record(&f, 1514, 1514, 0xBB);
  Record(&f, 14, 14, 0xCC);
  absl::StatusOr<PcapFile> p = ParsePcap(f);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->frames.size(), 3u);
  EXPECT_EQ(p->max_length, 1514u);
  EXPECT_EQ(p->truncated, 0u);
  EXPECT_EQ(p->Frame(0).size(), 60u);
  EXPECT_EQ(p->Frame(0)[0], 0xAA);
  EXPECT_EQ(p->Frame(0)[59], 0xAA);
  EXPECT_EQ(p->Frame(1).size(), 1514u);
  EXPECT_EQ(p->Frame(1)[0], 0xBB);
  EXPECT_EQ(p->Frame(2)[13], 0xCC);
}

TEST(PcapReader, ReadsBigEndianAndNanosecondFiles) {
  for (uint32_t magic : {0xA1B2C3D4u, 0xA1B23C4Du}) {
    std::vector<uint8_t> f = Header(magic, 1, /*big=*/true);
    Record(&f, 64, 64, 0x11, /*big=*/true);
    absl::StatusOr<PcapFile> p = ParsePcap(f);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_EQ(p->frames.size(), 1u);
    EXPECT_EQ(p->Frame(0).size(), 64u);
  }
}

TEST(PcapReader, CountsRecordsCutBySnaplen) {
  std::vector<uint8_t> f = Header();
  Record(&f, 96, 1514, 0x22);
  Record(&f, 60, 60, 0x22);
  absl::StatusOr<PcapFile> p = ParsePcap(f);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->truncated, 1u);
  EXPECT_EQ(p->Frame(0).size(), 96u);  // what was captured is what is sent
}

TEST(PcapReader, TakesTheLinkTypeFromItsLow16Bits) {
  std::vector<uint8_t> f = Header(0xA1B2C3D4, 1 | (1u << 28));  // FCS flag set by the writer
  Record(&f, 60, 60, 0);
  EXPECT_TRUE(ParsePcap(f).ok());
}

void ExpectRefused(const std::vector<uint8_t>& f, const std::string& what) {
  absl::StatusOr<PcapFile> p = ParsePcap(f);
  ASSERT_FALSE(p.ok()) << "accepted, wanted: " << what;
  EXPECT_THAT(std::string(p.status().message()), HasSubstr(what));
}

TEST(PcapReader, RefusesFilesThatAreNotPcap) {
  ExpectRefused({}, "shorter than a pcap file header");
  ExpectRefused(std::vector<uint8_t>(23, 0xA1), "shorter than a pcap file header");
  ExpectRefused(Header(0x12345678), "not a pcap file: magic 0x12345678");
  ExpectRefused(Header(0x0A0D0D0A), "pcapng");
  ExpectRefused(Header(0xA1B2C3D4, 101), "link type 101");  // raw IP
  ExpectRefused(Header(), "no packets");
}

TEST(PcapReader, RefusesBadRecordsNamingThem) {
  std::vector<uint8_t> good = Header();
  Record(&good, 60, 60, 0);  // record 0, at byte 24; record 1 at 100

  std::vector<uint8_t> f = good;
  f.insert(f.end(), 15, 0);
  ExpectRefused(f, "record 1 at byte 100: truncated header (15 of 16 bytes)");

  f = good;
  Record(&f, 60, 60, 0);
  f.pop_back();
  ExpectRefused(f, "record 1 at byte 100: truncated frame (59 of 60 bytes)");

  f = good;
  Record(&f, kMaxPcapFrame + 1, kMaxPcapFrame + 1, 0);
  ExpectRefused(f, "record 1 at byte 100: 9243 captured bytes, more than the largest frame");

  f = good;
  Record(&f, 13, 13, 0);
  ExpectRefused(f, "record 1 at byte 100: 13 captured bytes, shorter than an Ethernet header");

  f = good;
  Record(&f, 0, 0, 0);
  ExpectRefused(f, "shorter than an Ethernet header");

  f = good;
  Record(&f, 60, 59, 0);
  ExpectRefused(f, "60 bytes captured of a 59-byte frame");

  // A length that would wrap an offset computed in 32 bits.
  f = good;
  Put32(&f, 0, false);
  Put32(&f, 0, false);
  Put32(&f, 0xFFFFFFF0u, false);
  Put32(&f, 0xFFFFFFF0u, false);
  ExpectRefused(f, "more than the largest frame");
}

TEST(PcapReader, ReadPcapNamesTheFile) {
  absl::StatusOr<PcapFile> p = ReadPcap("/nonexistent/dir/x.pcap");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("/nonexistent/dir/x.pcap"));

  char path[] = "/tmp/pcap_reader_test_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> f = Header();
  Record(&f, 60, 60, 0x5A);
  Record(&f, 70, 70, 0x5B);
  f.push_back(0);  // a stray byte after the last record
  ASSERT_EQ(write(fd, f.data(), f.size()), static_cast<ssize_t>(f.size()));
  close(fd);
  p = ReadPcap(path);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(std::string(p.status().message()), HasSubstr(std::string(path) + ": record 2"));
  f.pop_back();
  FILE* w = std::fopen(path, "wb");
  ASSERT_NE(w, nullptr);
  std::fwrite(f.data(), 1, f.size(), w);
  std::fclose(w);
  p = ReadPcap(path);
  unlink(path);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->frames.size(), 2u);
  EXPECT_EQ(p->Frame(1)[69], 0x5B);
}

}  // namespace
}  // namespace maglb::bench

#include "packet_builder.h"

#include <cstdio>
#include <cstdlib>

namespace maglb::testing {
namespace {

void Put16(Bytes& b, size_t at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v >> 8);
  b[at + 1] = static_cast<uint8_t>(v);
}
void Push16(Bytes& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}
void Push32(Bytes& b, uint32_t v) {
  Push16(b, static_cast<uint16_t>(v >> 16));
  Push16(b, static_cast<uint16_t>(v));
}
void Append(Bytes& b, const uint8_t* p, size_t n) { b.insert(b.end(), p, p + n); }

}  // namespace

// Deliberately the textbook RFC 1071 loop, separate from src/core's.
uint16_t RefChecksum(const Bytes& pseudo, const uint8_t* data, size_t len) {
  uint32_t sum = 0;
  auto add = [&sum](const uint8_t* p, size_t n) {
    for (size_t i = 0; i + 1 < n; i += 2) sum += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
    if (n % 2) sum += static_cast<uint32_t>(p[n - 1] << 8);
  };
  add(pseudo.data(), pseudo.size());
  add(data, len);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

IpAddress Ip(std::string_view text) {
  auto ip = IpAddress::Parse(text);
  if (!ip) {
    std::fprintf(stderr, "bad IP literal in test: %.*s\n", static_cast<int>(text.size()), text.data());
    std::abort();
  }
  return *ip;
}

MacAddress Mac(std::string_view text) {
  auto mac = MacAddress::Parse(text);
  if (!mac) std::abort();
  return *mac;
}

Bytes Tcp(uint16_t sport, uint16_t dport, uint8_t flags, size_t payload, uint8_t data_offset_words) {
  Bytes b;
  Push16(b, sport);
  Push16(b, dport);
  Push32(b, 1000);  // seq
  Push32(b, 0);     // ack
  b.push_back(static_cast<uint8_t>(data_offset_words << 4));
  b.push_back(flags);
  Push16(b, 65535);  // window
  Push16(b, 0);      // checksum
  Push16(b, 0);      // urgent
  // Options (NOPs) up to the data offset, when it is sane.
  while (b.size() < size_t{data_offset_words} * 4) b.push_back(1);
  for (size_t i = 0; i < payload; ++i) b.push_back(static_cast<uint8_t>('a' + i % 26));
  return b;
}

Bytes Udp(uint16_t sport, uint16_t dport, size_t payload) {
  Bytes b;
  Push16(b, sport);
  Push16(b, dport);
  Push16(b, static_cast<uint16_t>(8 + payload));
  Push16(b, 0);
  for (size_t i = 0; i < payload; ++i) b.push_back(static_cast<uint8_t>(i));
  return b;
}

Bytes Icmp(uint8_t type, uint8_t code, uint32_t rest, const Bytes& body) {
  Bytes b{type, code, 0, 0};
  Push32(b, rest);
  b.insert(b.end(), body.begin(), body.end());
  return b;
}

Bytes Echo(bool v6, uint16_t id, uint16_t seq, size_t payload) {
  Bytes body;
  for (size_t i = 0; i < payload; ++i) body.push_back(static_cast<uint8_t>(0x30 + i));
  return Icmp(v6 ? 128 : 8, 0, uint32_t{id} << 16 | seq, body);
}

namespace {
// Fills the L4 checksum of `l4` (protocol `proto`) given a pseudo-header.
void FillL4Checksum(uint8_t proto, const Bytes& pseudo, Bytes& l4, bool v6) {
  size_t at;
  if (proto == 6 && l4.size() >= 20) {
    at = 16;
  } else if (proto == 17 && l4.size() >= 8) {
    at = 6;
  } else if ((proto == 1 && !v6 && l4.size() >= 4) || (proto == 58 && v6 && l4.size() >= 4)) {
    at = 2;
  } else {
    return;
  }
  Put16(l4, at, 0);
  uint16_t c = RefChecksum(proto == 1 ? Bytes{} : pseudo, l4.data(), l4.size());
  if (proto == 17 && c == 0) c = 0xFFFF;
  Put16(l4, at, c);
}
}  // namespace

Bytes Ipv4(const Ip4& h, const Bytes& payload) {
  Bytes b;
  const size_t hlen = 20 + h.options.size();
  b.push_back(static_cast<uint8_t>(0x40 | hlen / 4));
  b.push_back(h.tos);
  Push16(b, static_cast<uint16_t>(hlen + payload.size()));
  Push16(b, h.id);
  Push16(b, static_cast<uint16_t>((h.df ? 0x4000 : 0) | (h.mf ? 0x2000 : 0) | h.frag_offset / 8));
  b.push_back(h.ttl);
  b.push_back(h.proto);
  Push16(b, 0);
  Append(b, h.src.bytes.data(), 4);
  Append(b, h.dst.bytes.data(), 4);
  b.insert(b.end(), h.options.begin(), h.options.end());
  Put16(b, 10, RefChecksum({}, b.data(), hlen));
  Bytes l4 = payload;
  if (!h.mf && h.frag_offset == 0) {
    Bytes pseudo;
    Append(pseudo, h.src.bytes.data(), 4);
    Append(pseudo, h.dst.bytes.data(), 4);
    pseudo.push_back(0);
    pseudo.push_back(h.proto);
    Push16(pseudo, static_cast<uint16_t>(l4.size()));
    FillL4Checksum(h.proto, pseudo, l4, false);
  }
  b.insert(b.end(), l4.begin(), l4.end());
  return b;
}

Bytes Ipv6(const Ip6& h, const Bytes& payload) {
  Bytes ext;
  bool fragmented = false;
  for (size_t i = 0; i < h.ext.size(); ++i) {
    const Ext6& e = h.ext[i];
    const uint8_t next = i + 1 < h.ext.size() ? h.ext[i + 1].type : h.proto;
    if (e.type == 44) {
      ext.push_back(next);
      ext.push_back(0);
      Push16(ext, static_cast<uint16_t>((e.frag_offset & 0xFFF8) | (e.more ? 1 : 0)));
      Push32(ext, e.id);
      if (e.frag_offset != 0 || e.more) fragmented = true;
      continue;
    }
    ext.push_back(next);
    ext.push_back(static_cast<uint8_t>(e.len / 8 - 1));
    if (e.type == 43) {  // routing type 4 (segment routing) would need more; type 0-like, segments left 0
      ext.push_back(2);
      ext.push_back(0);
      for (size_t k = 4; k < e.len; ++k) ext.push_back(0);
    } else {  // options: PadN filling the header
      ext.push_back(1);
      ext.push_back(static_cast<uint8_t>(e.len - 4));
      for (size_t k = 4; k < e.len; ++k) ext.push_back(0);
    }
  }
  Bytes b;
  Push32(b, 6u << 28 | uint32_t{h.traffic_class} << 20 | 0x12345);
  Push16(b, static_cast<uint16_t>(ext.size() + payload.size()));
  b.push_back(h.ext.empty() ? h.proto : h.ext[0].type);
  b.push_back(h.hop_limit);
  Append(b, h.src.bytes.data(), 16);
  Append(b, h.dst.bytes.data(), 16);
  b.insert(b.end(), ext.begin(), ext.end());
  Bytes l4 = payload;
  if (!fragmented) {
    Bytes pseudo;
    Append(pseudo, h.src.bytes.data(), 16);
    Append(pseudo, h.dst.bytes.data(), 16);
    Push32(pseudo, static_cast<uint32_t>(l4.size()));
    Push32(pseudo, h.proto);
    FillL4Checksum(h.proto, pseudo, l4, true);
  }
  b.insert(b.end(), l4.begin(), l4.end());
  return b;
}

Bytes Arp(uint16_t op, MacAddress sha, IpAddress spa, MacAddress tha, IpAddress tpa) {
  Bytes b;
  Push16(b, 1);
  Push16(b, 0x0800);
  b.push_back(6);
  b.push_back(4);
  Push16(b, op);
  Append(b, sha.bytes.data(), 6);
  Append(b, spa.bytes.data(), 4);
  Append(b, tha.bytes.data(), 6);
  Append(b, tpa.bytes.data(), 4);
  return b;
}

Bytes Frame(const Eth& e, uint16_t ethertype, const Bytes& l3, bool pad) {
  Bytes b;
  Append(b, e.dst.bytes.data(), 6);
  Append(b, e.src.bytes.data(), 6);
  for (size_t i = 0; i < e.vlans.size(); ++i) {
    Push16(b, (i == 0 && e.qinq) ? 0x88A8 : 0x8100);
    Push16(b, e.vlans[i]);
  }
  Push16(b, ethertype);
  b.insert(b.end(), l3.begin(), l3.end());
  if (pad) {
    while (b.size() < 60) b.push_back(0);
  }
  return b;
}

Bytes Frame4(const Ip4& h, const Bytes& l4, const Eth& e) { return Frame(e, 0x0800, Ipv4(h, l4)); }
Bytes Frame6(const Ip6& h, const Bytes& l4, const Eth& e) { return Frame(e, 0x86DD, Ipv6(h, l4)); }

}  // namespace maglb::testing

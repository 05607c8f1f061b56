#include "maglb/ip_address.h"

#include <arpa/inet.h>

#include <cstdio>
#include <string>

namespace maglb {

std::optional<IpAddress> IpAddress::Parse(std::string_view text) {
  std::string s(text);  // inet_pton wants a terminated string
  IpAddress ip;
  if (inet_pton(AF_INET, s.c_str(), ip.bytes.data()) == 1) return ip;
  ip.is_v6 = true;
  if (inet_pton(AF_INET6, s.c_str(), ip.bytes.data()) == 1) return ip;
  return std::nullopt;
}

std::string IpAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(is_v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof(buf));
  return buf;
}

std::optional<MacAddress> MacAddress::Parse(std::string_view text) {
  if (text.size() != 17) return std::nullopt;
  MacAddress mac;
  for (int i = 0; i < 6; ++i) {
    if (i > 0 && text[3 * i - 1] != ':') return std::nullopt;
    unsigned v = 0;
    for (int j = 0; j < 2; ++j) {
      char c = text[3 * i + j];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return std::nullopt;
    }
    mac.bytes[i] = static_cast<uint8_t>(v);
  }
  return mac;
}

std::string MacAddress::ToString() const {
  char buf[18];
  std::snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", bytes[0], bytes[1],
                bytes[2], bytes[3], bytes[4], bytes[5]);
  return buf;
}

IpAddress LinkLocalOf(const MacAddress& mac) {
  IpAddress a;
  a.is_v6 = true;
  a.bytes = {0xfe, 0x80, 0, 0, 0, 0, 0, 0,
             static_cast<uint8_t>(mac.bytes[0] ^ 0x02),  // the universal/local bit, inverted
             mac.bytes[1], mac.bytes[2], 0xff, 0xfe, mac.bytes[3], mac.bytes[4], mac.bytes[5]};
  return a;
}

}  // namespace maglb

// IPv4/IPv6 addresses as plain bytes, for the config model and the packet path.
#ifndef MAGLB_IP_ADDRESS_H_
#define MAGLB_IP_ADDRESS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace maglb {

struct IpAddress {
  bool is_v6 = false;
  /// Network byte order. IPv4 uses bytes[0..3]; the rest stay zero so that
  /// comparisons and hashes of two equal addresses agree.
  std::array<uint8_t, 16> bytes{};

  static std::optional<IpAddress> Parse(std::string_view text);
  static IpAddress V4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
    IpAddress ip;
    ip.bytes = {a, b, c, d};
    return ip;
  }
  std::string ToString() const;
  size_t length() const { return is_v6 ? 16 : 4; }
  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

struct MacAddress {
  std::array<uint8_t, 6> bytes{};
  static std::optional<MacAddress> Parse(std::string_view text);
  std::string ToString() const;
  friend bool operator==(const MacAddress&, const MacAddress&) = default;
};

/// The IPv6 link-local address fe80::/64 with the modified EUI-64 interface
/// identifier of `mac` (RFC 4291 2.5.1 and appendix A): what Linux gives an
/// Ethernet interface by default. The kernel interface carries it.
IpAddress LinkLocalOf(const MacAddress& mac);

}  // namespace maglb

#endif  // MAGLB_IP_ADDRESS_H_

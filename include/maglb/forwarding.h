// How packets reach a backend, and the encapsulation defaults: what encap.h
// needs of the configuration model.
#ifndef MAGLB_FORWARDING_H_
#define MAGLB_FORWARDING_H_

#include <cstdint>
#include <string_view>

namespace maglb {

/// encap.h describes each mode.
enum class Forwarding : uint8_t { kGre, kIpip, kL2Dsr };

std::string_view ToString(Forwarding f);

/// Defaults of [lb] mtu (the egress MTU) and encap_ttl (the outer TTL).
inline constexpr uint32_t kDefaultMtu = 1500;
inline constexpr uint8_t kDefaultEncapTtl = 64;

}  // namespace maglb

#endif  // MAGLB_FORWARDING_H_

// The control plane's neighbour table: which next hops the data plane needs
// (the gateways of encapsulated VIPs, the backends of L2-DSR VIPs), what ARP /
// neighbour discovery learned about them, and the requests that resolve them.
// The workers never read this table: the control thread folds it into the
// next LbState snapshot (LbState::WithNeighbors) and publishes that.
#ifndef MAGLB_CONTROL_NEIGHBOR_H_
#define MAGLB_CONTROL_NEIGHBOR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "maglb/config.h"
#include "maglb/ip_address.h"
#include "maglb/neighbor_ignore.h"
#include "maglb/packet.h"

namespace maglb {

/// How often an unresolved next hop is asked for, and how often a resolved
/// one is refreshed (its MAC may change).
inline constexpr uint64_t kNeighborRetryNs = 1'000'000'000;
inline constexpr uint64_t kNeighborRefreshNs = 30'000'000'000;

// What is learned (see NeighborTable::Observe): an answer to a request the LB
// sent less than kNeighborAnswerWindowNs ago. An unresolved address takes the
// first answer at once, but a second MAC answering the same request undoes
// that (unresolved again: a forger answering first must not keep it), and
// from then on it is resolved like a change below. A known MAC is never replaced by one frame: an unsolicited
// claim of another MAC only makes the LB ask (at most once per
// kNeighborRetryNs), and a different MAC in the answers is taken only when it
// answered one request's whole window alone and then answers the next request
// (sent when that window closes); a window in which two MACs answer keeps the
// old one (a forger racing the real host: counted as a conflict). Never a
// multicast, broadcast or zero MAC; never an address with a static
// [[neighbor]] entry.
inline constexpr uint64_t kNeighborAnswerWindowNs = 3'000'000'000;
/// Ignored frames are logged at most once per reason per this interval.
inline constexpr uint64_t kNeighborLogIntervalNs = 10'000'000'000;

// Why a claim taught nothing: NeighborIgnore (maglb/neighbor_ignore.h).

/// The counter name of a reason, e.g. "bad_mac" (telemetry:
/// neighbor_ignored_bad_mac).
std::string_view NeighborIgnoreName(NeighborIgnore r);

/// What one ARP reply or neighbour advertisement states, read from a frame
/// that Classify sent to kLocalArp / kLocalNd (so: to us, and for ND with
/// hop limit 255 and a valid checksum).
struct NeighborClaim {
  IpAddress address;
  MacAddress mac;         ///< ARP sender hardware address / NA target link-layer option
  MacAddress eth_source;  ///< the frame's Ethernet source
  bool is_nd = false;
  bool solicited = false;      ///< NA S flag; ARP replies carry none
  bool override_flag = true;   ///< NA O flag; an ARP reply acts as if it were set
  bool to_multicast = false;   ///< NA sent to a multicast group
};

/// The claim of an ARP reply (op 2) or a neighbour advertisement with a
/// target link-layer address option; nullopt for anything else (requests,
/// solicitations, advertisements without the option, hop limit != 255).
std::optional<NeighborClaim> ReadNeighborClaim(std::span<const uint8_t> frame, const ParsedPacket& p);

/// Addresses whose MACs forwarding needs under `config` and that no static
/// [[neighbor]] entry gives.
std::vector<IpAddress> WantedNeighbors(const Config& config);

struct IpAddressLess {
  bool operator()(const IpAddress& a, const IpAddress& b) const {
    return a.is_v6 != b.is_v6 ? a.is_v6 < b.is_v6 : a.bytes < b.bytes;
  }
};

/// What Observe did with a claim.
struct NeighborOutcome {
  bool changed = false;  ///< a wanted address's MAC is new or changed: republish
  std::optional<NeighborIgnore> ignored;
  std::string log;  ///< a line to log now ("" if none: nothing new, or rate-limited)
};

class NeighborTable {
 public:
  /// Replaces the set of addresses to resolve (after a reload); keeps what is
  /// known about the ones that stay.
  void SetWanted(std::vector<IpAddress> wanted);
  /// SetWanted(WantedNeighbors(config)), and remembers the static entries so
  /// that claims about them are counted as such.
  void SetConfig(const Config& config);

  /// Applies the policy above to what a frame claimed: learns, confirms or
  /// ignores it (counted under a reason, logged at most once per reason per
  /// kNeighborLogIntervalNs with how many were not logged since).
  NeighborOutcome Observe(const NeighborClaim& claim, uint64_t now_ns);

  std::optional<MacAddress> Lookup(const IpAddress& address) const;

  /// The wanted addresses that should be asked for now (unresolved and not
  /// asked within kNeighborRetryNs, or resolved longer than
  /// kNeighborRefreshNs ago); marks them asked.
  std::vector<IpAddress> DueRequests(uint64_t now_ns);

  size_t wanted() const { return entries_.size(); }
  size_t resolved() const;
  /// Frames ignored so far, by NeighborIgnore.
  const std::array<uint64_t, kNumNeighborIgnores>& ignored() const { return ignored_; }

 private:
  struct Entry {
    std::optional<MacAddress> mac;
    uint64_t learned_ns = 0;  // MAC set, or confirmed by an answer
    uint64_t asked_ns = 0;    // the last request; its answer window starts here
    bool asked = false;
    bool recheck = false;  // a claim disputes the MAC: ask again
    // The answers to the last request (within its window).
    std::optional<MacAddress> first_answer;
    bool conflict = false;  // two MACs answered it
    // A MAC other than `mac` that answered the request at candidate_asked_ns
    // alone; taken if it answers the next one too.
    std::optional<MacAddress> candidate;
    uint64_t candidate_asked_ns = 0;
    // Set when an answer to the last request changed `mac` (from `previous`,
    // empty if it resolved the address): a conflicting answer in the same
    // window puts `previous` back.
    bool changed_by_last = false;
    std::optional<MacAddress> previous;
    // Unresolved after two MACs answered one request: the first answer no
    // longer resolves it, only a candidate confirmed as above.
    bool contested = false;

    // The answers decided on `to` (replacing `previous`, empty if it
    // resolved the address).
    void Adopt(const MacAddress& to, std::optional<MacAddress> replaced, uint64_t now_ns) {
      previous = replaced;
      mac = to;
      learned_ns = now_ns;
      changed_by_last = true;
      contested = false;
      candidate.reset();
      recheck = false;
    }
  };
  NeighborOutcome Ignore(const NeighborClaim& claim, NeighborIgnore why, uint64_t now_ns,
                         std::string_view detail = {});
  NeighborOutcome Conflict(const NeighborClaim& claim, Entry& e, MacAddress other,
                           uint64_t now_ns);

  std::map<IpAddress, Entry, IpAddressLess> entries_;
  std::set<IpAddress, IpAddressLess> static_;
  std::array<uint64_t, kNumNeighborIgnores> ignored_{};
  std::array<uint64_t, kNumNeighborIgnores> last_log_ns_{};
  std::array<uint64_t, kNumNeighborIgnores> unlogged_{};
  std::array<bool, kNumNeighborIgnores> logged_once_{};
};

/// Builds a broadcast ARP request "who has `target`? tell `our_ip`" into
/// `out` (at least kArpRequestLen bytes). Returns its length or 0.
inline constexpr size_t kArpRequestLen = 60;  // padded to the Ethernet minimum
size_t BuildArpRequest(const MacAddress& our_mac, const IpAddress& our_ip,
                       const IpAddress& target, std::span<uint8_t> out);

/// Builds a neighbour solicitation for `target` to its solicited-node
/// multicast address (RFC 4861 7.2.2) into `out`. Returns its length or 0.
inline constexpr size_t kNeighborSolicitLen = 14 + 40 + 32;
size_t BuildNeighborSolicit(const MacAddress& our_mac, const IpAddress& our_ip,
                            const IpAddress& target, std::span<uint8_t> out);

}  // namespace maglb

#endif  // MAGLB_CONTROL_NEIGHBOR_H_

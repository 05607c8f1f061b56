#include "dataplane/capture.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_pdump.h>
#include <unistd.h>

#include <string>
#include <string_view>

#include "absl/strings/str_format.h"

namespace maglb {
namespace {

// The --file-prefix: the last part of EAL's runtime directory
// (/var/run/dpdk/PREFIX), which is what a secondary process looks for.
std::string_view FilePrefix() {
  std::string_view dir = rte_eal_get_runtime_dir();
  size_t slash = dir.rfind('/');
  return slash == std::string_view::npos ? dir : dir.substr(slash + 1);
}

}  // namespace

CaptureService CaptureService::Start() {
  if (rte_eal_has_hugepages() == 0) {
    return CaptureService(
        false, "warning: packet capture unavailable: with --no-huge maglb's memory is private, so "
               "dpdk-dumpcap and dpdk-pdump cannot attach; start maglb on hugepages to capture");
  }
  // A secondary process maps the shared config and talks over the primary's
  // socket, both in the runtime directory; --in-memory (or --no-shconf)
  // makes neither, though rte_pdump_init succeeds.
  const std::string runtime_dir = rte_eal_get_runtime_dir();
  for (const char* file : {"config", "mp_socket"}) {
    if (access((runtime_dir + "/" + file).c_str(), F_OK) != 0) {
      return CaptureService(
          false, absl::StrFormat("warning: packet capture unavailable: no %s/%s (--in-memory or "
                                 "--no-shconf), so dpdk-dumpcap and dpdk-pdump cannot attach",
                                 runtime_dir, file));
    }
  }
  if (rte_pdump_init() != 0) {
    return CaptureService(false, absl::StrFormat("warning: packet capture unavailable: rte_pdump_init: %s",
                                                 rte_strerror(rte_errno)));
  }
  const std::string_view prefix = FilePrefix();
  return CaptureService(
      true, absl::StrFormat("packet capture available: dpdk-dumpcap --file-prefix %s -i PORT "
                            "-w FILE.pcapng (PORT: a port number or name; -D lists them)",
                            prefix));
}

void CaptureService::Stop() {
  if (started_) rte_pdump_uninit();
  started_ = false;
}

}  // namespace maglb

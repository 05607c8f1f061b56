// Packet capture by DPDK's own tools. dpdk-dumpcap and dpdk-pdump run as
// DPDK secondary processes of maglb (same --file-prefix): they map maglb's
// hugepage memory, make a ring and a buffer pool there, and ask maglb over
// EAL's multi-process channel to copy what each queue of a port receives and
// sends into that ring. rte_pdump_init makes maglb answer those requests.
//
// Cost: the copying callbacks are added to a port's queues when a capture
// starts and removed when it ends (or its tool exits); rte_eth_rx_burst and
// rte_eth_tx_burst test one pointer for callbacks whether or not pdump is
// initialised, so with nobody capturing the workers' path is unchanged.
// While a capture runs, each worker copies every packet of its queue (up to
// the tool's snap length) into the tool's pool. The copy of a sent frame is
// taken before the NIC sees it: where the port computes the outer IPv4
// checksum (offloads.h), the capture shows that field 0.
#ifndef MAGLB_DATAPLANE_CAPTURE_H_
#define MAGLB_DATAPLANE_CAPTURE_H_

#include <string>
#include <utility>

namespace maglb {

/// Answers capture requests while it lives (rte_pdump_uninit when
/// destroyed). Make it after the EAL, destroy it before.
class CaptureService {
 public:
  /// Starts answering capture requests where a secondary process can
  /// attach: not with --no-huge (maglb's memory is then private: a tool
  /// could not map it, and a pointer of the tool's would mean nothing here)
  /// nor --in-memory / --no-shconf (no shared config, no socket to ask
  /// over). note() says which.
  static CaptureService Start();

  CaptureService(CaptureService&& other) noexcept
      : started_(std::exchange(other.started_, false)), note_(std::move(other.note_)) {}
  CaptureService& operator=(CaptureService&&) = delete;
  ~CaptureService() { Stop(); }

  /// Stops answering; a capture in progress keeps its callbacks until the
  /// ports close (the workers have stopped by then).
  void Stop();

  bool available() const { return started_; }
  /// One line for the log: the command that captures, or why none can.
  const std::string& note() const { return note_; }

 private:
  CaptureService(bool started, std::string note) : started_(started), note_(std::move(note)) {}

  bool started_;
  std::string note_;
};

}  // namespace maglb

#endif  // MAGLB_DATAPLANE_CAPTURE_H_

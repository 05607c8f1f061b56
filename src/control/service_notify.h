// Tells the service manager (systemd, Type=notify) what the daemon is doing:
// READY=1 once it serves, RELOADING=1 / READY=1 around a reload, STOPPING=1
// when it begins to stop, STATUS= lines for `systemctl status`. Without
// $NOTIFY_SOCKET (not started by systemd) every call does nothing.
//
// The datagram protocol of sd_notify(3), spoken directly: one AF_UNIX
// SOCK_DGRAM message of newline-separated VAR=value lines to the path (or,
// with a leading '@', the abstract name) in $NOTIFY_SOCKET. systemd documents
// it as a stable interface; it needs no libsystemd.
#ifndef MAGLB_CONTROL_SERVICE_NOTIFY_H_
#define MAGLB_CONTROL_SERVICE_NOTIFY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace maglb {

/// Sends `state` (e.g. "READY=1\nSTATUS=serving") to $NOTIFY_SOCKET. Returns
/// false when there is no socket or the send failed (logged once: a manager
/// waiting for READY=1 would time the service out, the operator should know
/// why). Never blocks; safe from any thread.
bool ServiceNotify(std::string_view state);

/// The daemon serves: READY=1 with a STATUS line.
void NotifyReady(std::string_view status);
/// A reload is being built (RELOADING=1, with the MONOTONIC_USEC that
/// systemd >= 253 asks for), then NotifyReady when it is published or refused.
void NotifyReloading(std::string_view status);
/// The daemon begins to stop (a drain included): STOPPING=1 with a STATUS.
void NotifyStopping(std::string_view status);
/// A STATUS line only.
void NotifyStatus(std::string_view status);

/// "serving generation N: V VIPs, B backends", the STATUS of a serving daemon.
std::string ServingStatus(uint64_t generation, size_t vips, size_t backends);

/// STATUS values kept to one line (a newline would start another variable).
std::string OneLine(std::string_view text);

}  // namespace maglb

#endif  // MAGLB_CONTROL_SERVICE_NOTIFY_H_

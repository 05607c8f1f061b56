// Process exit statuses, the same for the daemon and maglbctl: scripts and
// service managers tell "could not do it" from "was asked wrongly".
#ifndef MAGLB_EXIT_CODES_H_
#define MAGLB_EXIT_CODES_H_

namespace maglb {

inline constexpr int kExitOk = 0;
/// The work failed: an unreadable config, an unreachable daemon, a failed plot.
inline constexpr int kExitError = 1;
/// The command line was wrong (unknown argument, missing value).
inline constexpr int kExitUsage = 2;

}  // namespace maglb

#endif  // MAGLB_EXIT_CODES_H_

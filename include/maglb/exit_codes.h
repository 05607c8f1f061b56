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
/// `maglbctl fleet`: the sources were read and disagree (a monitoring check's
/// failure). The same value as kExitError: a check reads "not OK" from it.
inline constexpr int kExitDisagree = 1;
/// `maglbctl fleet`: a source (an instance's telemetry, a config file) could
/// not be read, so agreement is unknown; distinct from a disagreement.
inline constexpr int kExitUnreadable = 3;

}  // namespace maglb

#endif  // MAGLB_EXIT_CODES_H_

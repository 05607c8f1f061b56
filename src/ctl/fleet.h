// `maglbctl fleet`: do several maglb instances (live, over telemetry, or as
// their config files) hold the same table for every VIP?
#ifndef MAGLB_CTL_FLEET_H_
#define MAGLB_CTL_FLEET_H_

namespace maglb {

/// argv holds the arguments after "fleet". Returns the process exit status:
/// kExitOk when all sources agree, kExitDisagree when they do not,
/// kExitUsage, or kExitUnreadable when a source cannot be read.
int CmdFleet(int argc, char** argv);

/// Usage lines for maglbctl's help.
extern const char kFleetUsage[];

}  // namespace maglb

#endif  // MAGLB_CTL_FLEET_H_

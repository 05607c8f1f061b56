// `maglbctl drain`: asks a running maglb to withdraw its routes and stop
// (SIGUSR1 to the pid its telemetry socket names, once that pid is checked
// to be a maglb), and with --wait sees it gone.
#ifndef MAGLB_CTL_DRAIN_H_
#define MAGLB_CTL_DRAIN_H_

namespace maglb {

/// argv holds the arguments after "drain". Returns the process exit status:
/// kExitOk (draining; with --wait, stopped), kExitError (not signalled: the
/// pid is no maglb, or the signal failed), kExitUsage (a wrong command line,
/// or an instance that announces nothing), kExitUnreadable (the instance
/// could not be reached or read, or --wait timed out).
int CmdDrain(int argc, char** argv);

/// Usage lines for maglbctl's help.
extern const char kDrainUsage[];

}  // namespace maglb

#endif  // MAGLB_CTL_DRAIN_H_

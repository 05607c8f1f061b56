// `maglbctl top`: a live view of a running maglb, refreshed every interval:
// rates (packets, bytes and new flows per second per VIP and backend, drops
// per second by reason) from two successive telemetry reads, with health,
// weights and announcement. Plain text, for a terminal or a log.
#ifndef MAGLB_CTL_TOP_H_
#define MAGLB_CTL_TOP_H_

namespace maglb {

/// argv holds the arguments after "top". Returns the process exit code:
/// 0 when stopped by Ctrl-C/SIGTERM, after --iterations, or when maglb
/// stops (its telemetry socket goes away: "maglb stopped"); 1 when maglb
/// cannot be read at the start; 2 for a wrong command line.
int CmdTop(int argc, char** argv);

/// Usage lines for maglbctl's help.
inline constexpr const char* kTopUsage =
    "  maglbctl top [--prefix PREFIX | --socket PATH] [--interval-s SECONDS]\n"
    "               [--iterations N]\n"
    "      a live view of a running maglb, every SECONDS (default 1): per VIP\n"
    "      and backend packets/s, bytes/s, new flows/s, health, weight and\n"
    "      effective weight, announced; drops/s by reason. On a terminal it\n"
    "      redraws the screen; piped, it prints one block per refresh and a\n"
    "      blank line. Ends on Ctrl-C, after N refreshes, or when maglb stops\n"
    "      (\"maglb stopped\"), each with status 0\n";

}  // namespace maglb

#endif  // MAGLB_CTL_TOP_H_

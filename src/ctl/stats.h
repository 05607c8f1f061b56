// `maglbctl stats`: reads a running maglb's counters over its DPDK telemetry
// socket (the /maglb/... commands) and prints a table or JSON.
#ifndef MAGLB_CTL_STATS_H_
#define MAGLB_CTL_STATS_H_

namespace maglb {

/// argv holds the arguments after "stats". Returns the process exit code.
int CmdStats(int argc, char** argv);

/// Usage lines for maglbctl's help.
inline constexpr const char* kStatsUsage =
    "  maglbctl stats [--prefix PREFIX | --socket PATH] [--format table|json]\n"
    "      a running maglb's counters (per VIP and backend, with each\n"
    "      backend's health and effective weight; drops by reason, conntrack\n"
    "      per worker, generation, fingerprints; route announcement: its\n"
    "      state, table and each VIP address's route, and why), read over DPDK\n"
    "      telemetry:\n"
    "      /var/run/dpdk/PREFIX/dpdk_telemetry.v2 (PREFIX: maglb's\n"
    "      --file-prefix, default rte)\n";

}  // namespace maglb

#endif  // MAGLB_CTL_STATS_H_

// `maglbctl diff`: what a reload from one config file to another would move.
#ifndef MAGLB_CTL_DIFF_H_
#define MAGLB_CTL_DIFF_H_

namespace maglb {

/// argv holds the arguments after "diff". Returns the process exit status.
int CmdDiff(int argc, char** argv);

/// Usage lines for maglbctl's help.
extern const char kDiffUsage[];

}  // namespace maglb

#endif  // MAGLB_CTL_DIFF_H_

// `maglbctl table`: a config file's lookup tables, per VIP.
#ifndef MAGLB_CTL_TABLE_H_
#define MAGLB_CTL_TABLE_H_

namespace maglb {

/// argv holds the arguments after "table". Returns the process exit status.
int CmdTable(int argc, char** argv);

/// Usage lines for maglbctl's help.
extern const char kTableUsage[];

}  // namespace maglb

#endif  // MAGLB_CTL_TABLE_H_

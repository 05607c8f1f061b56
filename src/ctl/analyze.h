// `maglbctl analyze`: the hashing schemes measured side by side.
#ifndef MAGLB_CTL_ANALYZE_H_
#define MAGLB_CTL_ANALYZE_H_

namespace maglb {

/// Runs `maglbctl analyze [--classic] [--config FILE] [--format text|json]
/// [--plot FILE.png]`; argv holds the arguments after "analyze". Returns the
/// process exit status.
int CmdAnalyze(int argc, char** argv);

/// The usage lines of the command, for maglbctl's help.
extern const char kAnalyzeUsage[];

}  // namespace maglb

#endif  // MAGLB_CTL_ANALYZE_H_

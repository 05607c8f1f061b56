// Plotting with gnuplot: clustered bar charts, balance and disruption.
#include "plot.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "maglb/exit_codes.h"

namespace maglb::analyze {
namespace {

std::string GnuplotQuote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

int RunProcess(const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

int DrawPlots(const std::string& png, const std::vector<std::string>& schemes,
              const std::vector<Plot>& all_plots, const std::string& title) {
  // gnuplot stops at a histogram column without one finite value ("No valid
  // points in histogram") after it has begun the PNG. Such a series has no
  // figures to show (a VIP whose backends all drain, or with one serving
  // backend and so no failure to simulate): leave it out, and a chart left
  // with none, and refuse before gnuplot runs when nothing is left.
  std::vector<Plot> plots;
  for (const Plot& p : all_plots) {
    Plot kept = p;
    kept.series.clear();
    for (const PlotSeries& s : p.series) {
      if (std::any_of(s.values.begin(), s.values.end(),
                      [](double v) { return std::isfinite(v); })) {
        kept.series.push_back(s);
      } else {
        std::fprintf(stderr,
                     "maglbctl analyze: --plot: \"%s\" has no figure for any scheme in the "
                     "chart \"%s\"; left out of it\n",
                     s.label.c_str(), p.title.c_str());
      }
    }
    if (!kept.series.empty()) plots.push_back(std::move(kept));
  }
  if (plots.empty()) {
    std::fprintf(stderr,
                 "maglbctl analyze: --plot: nothing to draw (no VIP has a serving backend to "
                 "measure); %s was not written\n",
                 png.c_str());
    return kExitError;
  }
  char dir_template[] = "/tmp/maglbctl-plot-XXXXXX";
  char* dir = mkdtemp(dir_template);
  if (dir == nullptr) {
    std::fprintf(stderr, "maglbctl analyze: cannot create a temporary directory for --plot\n");
    return kExitError;
  }
  std::string script = absl::StrCat(dir, "/plot.gp");
  std::vector<std::string> files = {script};
  std::string gp = absl::StrFormat(
      "set terminal pngcairo size %d,560 font \"sans,10\"\nset output %s\n"
      "set multiplot layout 1,%zu title %s\nset style data histograms\n"
      "set style histogram clustered gap 1\nset style fill solid 0.85 border -1\n"
      "set boxwidth 0.9\nset key top left\nset grid ytics\nset xtics nomirror\n",
      560 * static_cast<int>(plots.size()), GnuplotQuote(png), plots.size(), GnuplotQuote(title));
  for (size_t p = 0; p < plots.size(); ++p) {
    std::string data = absl::StrCat(dir, "/plot", p, ".dat");
    files.push_back(data);
    std::ofstream out(data);
    out << "scheme";
    for (const PlotSeries& s : plots[p].series) out << "\t" << GnuplotQuote(s.label);
    out << "\n";
    for (size_t i = 0; i < schemes.size(); ++i) {
      out << GnuplotQuote(schemes[i]);
      for (const PlotSeries& s : plots[p].series) {
        double v = s.values[i];
        if (!std::isfinite(v)) {
          out << "\tNaN";
        } else {
          out << "\t" << absl::StrFormat("%.9g", plots[p].log_y ? std::max(v, 1e-6) : v);
        }
      }
      out << "\n";
    }
    absl::StrAppend(&gp, "set title ", GnuplotQuote(plots[p].title), "\nset ylabel ",
                    GnuplotQuote(plots[p].ylabel), "\n",
                    plots[p].log_y ? "set logscale y\nset yrange [0.1:*]\n"
                                   : "unset logscale y\nset yrange [0:*]\n");
    std::vector<std::string> parts;
    for (size_t c = 0; c < plots[p].series.size(); ++c) {
      parts.push_back(absl::StrFormat("%s using %d:xtic(1) title columnheader(%d)",
                                      c == 0 ? GnuplotQuote(data) : "''", c + 2, c + 2));
    }
    absl::StrAppend(&gp, "plot ", absl::StrJoin(parts, ", "), "\n");
  }
  gp += "unset multiplot\n";
  std::ofstream(script) << gp;
  int rc = RunProcess({"gnuplot", script});
  for (const std::string& f : files) std::remove(f.c_str());
  rmdir(dir);
  if (rc == 127) {
    std::fprintf(stderr, "maglbctl analyze: --plot needs gnuplot, which was not found; install "
                         "gnuplot-nox (scripts/install-deps.sh)\n");
    return kExitError;
  }
  if (rc != 0) {
    // Whatever gnuplot began writing is not a whole PNG: leave no file.
    std::remove(png.c_str());
    std::fprintf(stderr, "maglbctl analyze: gnuplot failed (exit %d) drawing %s; removed it\n",
                 rc, png.c_str());
    return kExitError;
  }
  return kExitOk;
}

}  // namespace maglb::analyze

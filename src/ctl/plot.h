// `maglbctl analyze --plot`: clustered bar charts drawn by gnuplot into a PNG.
#ifndef MAGLB_CTL_PLOT_H_
#define MAGLB_CTL_PLOT_H_

#include <string>
#include <vector>

namespace maglb::analyze {

struct PlotSeries {
  std::string label;           // a cluster (e.g. "N=10" or a VIP)
  std::vector<double> values;  // one per scheme
};

struct Plot {
  std::string title, ylabel;
  bool log_y = false;
  std::vector<PlotSeries> series;
};

// Draws `plots` side by side into `png`, one cluster of bars per series, one
// bar per scheme. Returns the process exit status; says why on stderr.
int DrawPlots(const std::string& png, const std::vector<std::string>& schemes,
              const std::vector<Plot>& all_plots, const std::string& title);

}  // namespace maglb::analyze

#endif  // MAGLB_CTL_PLOT_H_

// Stand-in for h/health's src/core/health.cc (the state machine), which
// defines HealthName with the rest: telemetry names health with it. On
// merging, take h/health's file.
#include "maglb/health.h"

namespace maglb {

std::string_view HealthName(BackendHealth h) {
  switch (h) {
    case BackendHealth::kUnchecked:
      return "unchecked";
    case BackendHealth::kUp:
      return "up";
    case BackendHealth::kDown:
      return "down";
  }
  return "?";
}

}  // namespace maglb

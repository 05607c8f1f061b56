// libFuzzer harness over the config loader: one input = one config file's
// text. Built with ASan + UBSan (scripts/fuzz.sh) over the harness and the
// core library, so a crash, a stack overflow inside toml++ (issue 8: a deep
// [a.a.a...] header), an out-of-bounds read in the nesting pre-scan, or
// undefined behaviour fails the run.
//
// Each input goes through ParseConfig (pre-scan, toml++, validation). Beyond
// "does not crash", it checks what an operator relies on: a refusal names the
// file ("fuzz.toml:..."), and an accepted config with small tables also
// builds (BuildLbState: every table scheme, ids, the VIP matcher), so that
// validation and building agree on what is valid.
#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <condition_variable>
#include <mutex>

#include "absl/strings/match.h"
#include "maglb/config.h"
#include "maglb/lb_state.h"

namespace {

// Tables above this many slots in total are not built: the point is to reach
// the builders with odd inputs, not to spend each run on a 65537-slot table.
constexpr uint64_t kMaxSlotsToBuild = 1u << 14;

void CheckOne(std::string_view text) {
  absl::StatusOr<maglb::Config> config = maglb::ParseConfig(text, "fuzz.toml");
  if (!config.ok()) {
    if (!absl::StartsWith(config.status().message(), "fuzz.toml")) {
      std::fprintf(stderr, "refusal does not name the file: %s\n",
                   std::string(config.status().message()).c_str());
      std::abort();
    }
    return;
  }
  uint64_t slots = 0;
  for (const maglb::VipConfig& v : config->vips) slots += v.table_size;
  if (slots > kMaxSlotsToBuild) return;
  absl::StatusOr<std::unique_ptr<const maglb::LbState>> state =
      maglb::BuildLbState(*config, nullptr, {});
  if (!state.ok() && !absl::StartsWith(state.status().message(), "fuzz.toml")) {
    std::fprintf(stderr, "build refusal does not name the file: %s\n",
                 std::string(state.status().message()).c_str());
    std::abort();
  }
}

// A stack overflow needs ~35k nesting levels on the daemon's 8 MiB stack, far
// more than an input of -max_len bytes holds. On a 256 KiB stack a few
// thousand levels overflow, so that unbounded recursion shows up here (ASan
// reports it) at input sizes the fuzzer explores. The nesting limits leave
// parsing far below that.
constexpr size_t kStackBytes = 256 << 10;

// One thread with that stack, kept for the whole run: creating a thread per
// input cost 60% of the run time (6k against 15k inputs/s here).
class SmallStackRunner {
 public:
  SmallStackRunner() {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, kStackBytes);
    if (pthread_create(&thread_, &attr, &SmallStackRunner::Loop, this) != 0) std::abort();
    pthread_attr_destroy(&attr);
  }

  void Run(std::string_view text) {
    std::unique_lock<std::mutex> lock(mu_);
    text_ = text;
    pending_ = true;
    cv_.notify_all();
    cv_.wait(lock, [this] { return !pending_; });
  }

 private:
  static void* Loop(void* arg) {
    auto* self = static_cast<SmallStackRunner*>(arg);
    std::unique_lock<std::mutex> lock(self->mu_);
    for (;;) {
      self->cv_.wait(lock, [self] { return self->pending_; });
      const std::string_view text = self->text_;
      lock.unlock();
      CheckOne(text);
      lock.lock();
      self->pending_ = false;
      self->cv_.notify_all();
    }
    return nullptr;
  }

  pthread_t thread_{};
  std::mutex mu_;
  std::condition_variable cv_;
  std::string_view text_;
  bool pending_ = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static SmallStackRunner* runner = new SmallStackRunner();  // lives for the process
  runner->Run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

// Cooperative cancellation and progress for long work (forward passes, pipeline simulations,
// sweeps, report building and writing).
//
// Long work takes a `Progress` callback, calls it now and then with (done, total) and stops as
// soon as it returns false, by throwing `Cancelled`. The CLI's progress bar returns false after
// Ctrl-C / SIGTERM; the GUI gives every background run its own `CancelToken`, so cancelling one
// run never affects another and a cancelled run's work really ends.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "attnres/error.hpp"

namespace attnres {

// Thrown by long work whose progress callback asked it to stop. An attnres::Error so that
// callers that do not distinguish it still report it ("... cancelled ...").
class Cancelled : public Error {
 public:
  explicit Cancelled(const std::string& what = "cancelled") : Error(what) {}
};

// (done, total) -> keep going? Empty means "no progress reporting, never cancelled".
using Progress = std::function<bool(std::size_t done, std::size_t total)>;

// Calls `progress` (when set) and throws Cancelled(what + " cancelled") when it says stop.
inline void report_progress(const Progress& progress, std::size_t done, std::size_t total,
                            const std::string& what) {
  if (progress && !progress(done, total)) throw Cancelled(what + " cancelled");
}

// A shared flag: copies observe the same state. Thread-safe.
class CancelToken {
 public:
  CancelToken() : flag_(std::make_shared<std::atomic<bool>>(false)) {}
  void cancel() const { flag_->store(true, std::memory_order_relaxed); }
  bool cancelled() const { return flag_->load(std::memory_order_relaxed); }
  // A progress callback that only checks this token (and forwards to `inner` when given).
  Progress progress(Progress inner = {}) const {
    return [flag = flag_, inner = std::move(inner)](std::size_t done, std::size_t total) {
      if (flag->load(std::memory_order_relaxed)) return false;
      return inner ? inner(done, total) : true;
    };
  }

 private:
  std::shared_ptr<std::atomic<bool>> flag_;
};

}  // namespace attnres

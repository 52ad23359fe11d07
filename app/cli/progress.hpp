// Interrupts and progress for long CLI work.
//
// While a command runs (cli::run holds an InterruptScope), the first Ctrl-C or SIGTERM asks the
// work to stop: every progress callback then returns false, the work throws attnres::Cancelled,
// staging folders are removed, and the command ends with "cancelled; nothing was written" and
// exit status 130. A second Ctrl-C ends the process at once (its staging folder, if any, is then
// removed by the next command that writes that directory).
//
// ProgressBar draws on stderr only when it is a terminal and the work has run for more than a
// second.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "attnres/cancel.hpp"

namespace attnres::cli {

// Installs the SIGINT/SIGTERM handlers for its lifetime (nested scopes share the first one).
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
};

// True once Ctrl-C or SIGTERM arrived in the current scope.
bool interrupt_requested();
// Throws attnres::Cancelled when an interrupt arrived (`what` names the work).
void throw_if_interrupted(const std::string& what);

// Test hook: when the environment variable `variable` names a FILE, the first call creates FILE
// and waits (up to 60 s) for Ctrl-C / SIGTERM, so that a test can interrupt a command at a known
// point (ATTNRES_TEST_HOLD_WRITE: a write phase; ATTNRES_TEST_HOLD_TRAIN: after train's first
// checkpoint; ATTNRES_TEST_HOLD_PROGRESS: the N-th update of the first progress bar, N from
// ATTNRES_TEST_HOLD_PROGRESS_AT, default 1, so inside long work). Does nothing when the variable
// is unset.
void hold_for_tests(const char* variable);

class ProgressBar {
 public:
  explicit ProgressBar(std::string label);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Returns false once the user pressed Ctrl-C (or SIGTERM arrived).
  bool update(std::size_t done, std::size_t total);
  // A Progress callback bound to this bar (valid while the bar lives).
  Progress callback() {
    return [this](std::size_t done, std::size_t total) { return update(done, total); };
  }
  // Changes the label (e.g. "sweep" -> "writing").
  void set_label(std::string label) { label_ = std::move(label); }

 private:
  std::string label_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool terminal_ = false;
  bool drawn_ = false;
  int serial_ = 0;  // 1 for the program's first bar (ATTNRES_TEST_HOLD_PROGRESS)
};

// The progress callback of a write phase: the bar's (so Ctrl-C stops it), plus the test hook
// ATTNRES_TEST_HOLD_WRITE (valid while the bar lives).
Progress write_phase_progress(ProgressBar& bar);

}  // namespace attnres::cli

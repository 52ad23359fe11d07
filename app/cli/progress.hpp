// A progress bar for long CLI work: drawn on stderr only when it is a terminal and the work has
// run for more than a second; Ctrl-C asks the work to stop (the callback returns false) and the
// command then ends with "cancelled" and writes nothing.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace attnres::cli {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Returns false once the user pressed Ctrl-C.
  bool update(std::size_t done, std::size_t total);

 private:
  std::string label_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool terminal_ = false;
  bool drawn_ = false;
  void (*previous_handler_)(int) = nullptr;
};

}  // namespace attnres::cli

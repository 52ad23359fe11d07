#include "progress.hpp"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>

namespace attnres::cli {

namespace {
std::atomic<bool> interrupted{false};
void on_interrupt(int) { interrupted = true; }
}  // namespace

ProgressBar::ProgressBar(std::string label)
    : label_(std::move(label)),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_),
      terminal_(isatty(fileno(stderr)) != 0) {
  interrupted = false;
  previous_handler_ = std::signal(SIGINT, on_interrupt);
}

ProgressBar::~ProgressBar() {
  std::signal(SIGINT, previous_handler_ == SIG_ERR ? SIG_DFL : previous_handler_);
  if (drawn_) std::fprintf(stderr, "\r\033[K");
}

bool ProgressBar::update(std::size_t done, std::size_t total) {
  if (interrupted) return false;
  if (!terminal_ || total == 0) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < std::chrono::seconds(1) || now - last_draw_ < std::chrono::milliseconds(100)) {
    return true;
  }
  last_draw_ = now;
  drawn_ = true;
  constexpr int kWidth = 30;
  const double fraction = static_cast<double>(done) / static_cast<double>(total);
  const int filled = static_cast<int>(fraction * kWidth);
  std::fprintf(stderr, "\r%s [%.*s%*s] %zu/%zu (Ctrl-C cancels)", label_.c_str(), filled,
               "##############################", kWidth - filled, "", done, total);
  std::fflush(stderr);
  return true;
}

}  // namespace attnres::cli

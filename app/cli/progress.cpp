#include "progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace attnres::cli {

namespace {

std::atomic<bool> interrupted{false};
std::atomic<int> scopes{0};
std::atomic<int> bars{0};  // progress bars made so far (ATTNRES_TEST_HOLD_PROGRESS holds the first)
struct sigaction previous_int, previous_term;

void on_interrupt(int signal_number) {
  if (interrupted.exchange(true) && signal_number == SIGINT) {
    // Second Ctrl-C: the user insists. Default action, re-raised.
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
}

}  // namespace

InterruptScope::InterruptScope() {
  if (scopes.fetch_add(1) != 0) return;
  interrupted = false;
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_int);
  sigaction(SIGTERM, &action, &previous_term);
}

InterruptScope::~InterruptScope() {
  if (scopes.fetch_sub(1) != 1) return;
  sigaction(SIGINT, &previous_int, nullptr);
  sigaction(SIGTERM, &previous_term, nullptr);
  interrupted = false;
}

bool interrupt_requested() {
  return interrupted.load();
}

void throw_if_interrupted(const std::string& what) {
  if (interrupted.load()) throw Cancelled(what + " cancelled");
}

ProgressBar::ProgressBar(std::string label)
    : label_(std::move(label)),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_),
      terminal_(isatty(fileno(stderr)) != 0),
      serial_(++bars) {}

ProgressBar::~ProgressBar() {
  if (drawn_) std::fprintf(stderr, "\r\033[K");
}

namespace {

// ATTNRES_TEST_HOLD_PROGRESS=FILE (with ATTNRES_TEST_HOLD_PROGRESS_AT=N, default 1): the N-th
// update of the program's first progress bar holds (hold_for_tests) until Ctrl-C / SIGTERM. A
// test waits for FILE, sends the signal, and so interrupts the work at a known point inside it.
void hold_progress_for_tests(int bar) {
  static std::size_t calls = 0;
  static const std::size_t at = [] {
    const char* text = std::getenv("ATTNRES_TEST_HOLD_PROGRESS_AT");
    return text && *text ? static_cast<std::size_t>(std::strtoull(text, nullptr, 10)) : 1;
  }();
  if (bar != 1 || ++calls != at) return;
  hold_for_tests("ATTNRES_TEST_HOLD_PROGRESS");
}

}  // namespace

bool ProgressBar::update(std::size_t done, std::size_t total) {
  hold_progress_for_tests(serial_);
  if (interrupted) return false;
  if (!terminal_ || total == 0) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < std::chrono::seconds(1) || now - last_draw_ < std::chrono::milliseconds(100)) {
    return true;
  }
  last_draw_ = now;
  drawn_ = true;
  constexpr int kWidth = 30;
  const double fraction =
      total ? static_cast<double>(std::min(done, total)) / static_cast<double>(total) : 0.0;
  const int filled = static_cast<int>(fraction * kWidth);
  std::fprintf(stderr, "\r\033[K%s [%.*s%*s] %zu/%zu (Ctrl-C cancels)", label_.c_str(), filled,
               "##############################", kWidth - filled, "", done, total);
  std::fflush(stderr);
  return true;
}

Progress write_phase_progress(ProgressBar& bar) {
  return [&bar](std::size_t done, std::size_t total) {
    hold_for_tests("ATTNRES_TEST_HOLD_WRITE");  // tests interrupt the write phase here
    return bar.update(done, total);
  };
}

void hold_for_tests(const char* variable) {
  static bool held = false;
  const char* marker = std::getenv(variable);
  if (held || !marker || !*marker) return;
  held = true;
  std::ofstream(marker) << variable << "\n";
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!interrupt_requested() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace attnres::cli

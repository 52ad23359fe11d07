// Waiting in GUI tests: process events until a condition holds, with a generous cap (never a
// fixed delay).
#pragma once

#include <QApplication>
#include <QElapsedTimer>
#include <QThread>
#include <functional>

namespace attnres::gui {

// Processes events until `done` holds; false after `limit_ms` (a generous cap, not a delay).
inline bool wait_until(const std::function<bool()>& done, qint64 limit_ms = 30000) {
  QElapsedTimer timer;
  timer.start();
  while (!done()) {
    if (timer.elapsed() > limit_ms) return false;
    QApplication::processEvents(QEventLoop::AllEvents, 5);
    QThread::msleep(1);
  }
  return true;
}

// Every change seen (the views coalesce changes into the next event-loop pass) and every run of
// `window` (a MainWindow) finished and applied; false when a run is still going after the cap.
template <class Window>
bool settle_runs(Window& window, qint64 limit_ms = 60000) {
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 5; ++i) QApplication::processEvents();
    if (!wait_until([&] { return window.runs_in_flight() == 0; }, limit_ms)) return false;
  }
  for (int i = 0; i < 5; ++i) QApplication::processEvents();
  return true;
}

}  // namespace attnres::gui

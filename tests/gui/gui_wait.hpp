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

}  // namespace attnres::gui

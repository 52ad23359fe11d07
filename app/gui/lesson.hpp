// The guided lesson of attnres-lab (Lesson menu): the README's teaching session as steps, each
// of which sets the inputs, shows its tab and says what to look for. The GUI test drives the same
// session with real input events and asserts each step's effect (tests/gui/test_lesson.cpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace attnres::gui {

class MainWindow;

struct LessonStep {
  std::string view;      // the tab the step shows
  std::string title;     // "Magnitudes: the standard residual grows with depth"
  std::string action;    // what the step sets, in words (the inputs are set for you)
  std::string look_for;  // the effect to point at
  std::function<void(MainWindow&)> apply;
  // In presentation mode, the one chart or heatmap (its ChartSpec / HeatmapSpec id) that fills
  // the tab with `look_for` as a callout beside its marker; "" shows the whole tab (the 2×2, two
  // maps side by side, the read's tables).
  std::string focus;
};

// The steps in order (one table: the Lesson menu and the README's session follow it).
const std::vector<LessonStep>& lesson_steps();

}  // namespace attnres::gui

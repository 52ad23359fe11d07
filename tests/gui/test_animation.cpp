// Animation (issue 30 item 4): the play buttons of query std (0 -> 2: the rows sharpen) and of S
// (1 -> L: the columns merge into block summaries), with a speed choice and a stop, and the α map
// over a training run's evaluations (live while the run trains, never veiled). Each frame is
// checked against the static view at the same setting.
#include <gtest/gtest.h>

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QPushButton>
#include <QSpinBox>
#include <QTest>
#include <QToolButton>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gui_wait.hpp"
#include "lesson.hpp"
#include "lesson_model.hpp"
#include "main_window.hpp"
#include "training_run.hpp"
#include "training_view.hpp"
#include "view_kit.hpp"
#include "widgets.hpp"

namespace attnres::gui {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_animation {

void idle(MainWindow& window) {
  ASSERT_TRUE(settle_runs(window));
}

std::unique_ptr<MainWindow> depth_window() {
  auto window = std::make_unique<MainWindow>(false);
  window->resize(1280, 720);
  window->show();
  EXPECT_TRUE(QTest::qWaitForWindowExposed(window.get()));
  window->recompute_all();
  idle(*window);
  window->lesson_step(1);  // depth attention, the random model, query std 0
  idle(*window);
  return window;
}

// The largest weight of each deeper read, averaged: how sharp the rows are.
double sharpness(const HeatmapWidget* map) {
  double total = 0;
  int count = 0;
  for (std::size_t r = 4; r < map->values().size(); ++r) {
    double best = 0;
    for (const double v : map->values()[r])
      if (!std::isnan(v)) best = std::max(best, v);
    total += best;
    ++count;
  }
  return count ? total / count : 0;
}

TEST(Animation, QueryStdPlaysFromZeroToTwoAndEachFrameIsTheStaticView) {
  auto window = depth_window();
  LessonModel& lesson = window->lesson();
  Player* player = lesson.query_player();
  ASSERT_NE(player, nullptr);
  HeatmapWidget* map = window->view("depth-attention")->heatmaps()[0];
  player->play();  // frame 0: query std 0
  EXPECT_TRUE(player->playing());
  EXPECT_EQ(player->button()->text(), "■");
  player->stop();  // the stop stops the timer: the frames below are stepped by hand
  EXPECT_FALSE(player->playing());
  idle(*window);
  EXPECT_DOUBLE_EQ(lesson.query_std->value(), 0.0);
  std::vector<std::vector<std::vector<double>>> frames;
  std::vector<double> settings, sharp;
  do {
    idle(*window);
    settings.push_back(lesson.query_std->value());
    frames.push_back(map->values());
    sharp.push_back(sharpness(map));
  } while (player->advance_once());
  ASSERT_EQ(frames.size(), 21u);                 // 0, 0.1, ..., 2
  EXPECT_DOUBLE_EQ(settings.back(), 2.0);        // a spin box's value is rounded to its decimals
  EXPECT_GT(sharp.back(), 2.0 * sharp.front());  // the rows sharpen
  // Frame k against the static view at the same query std, set by hand.
  for (const std::size_t k : {std::size_t{0}, std::size_t{7}, std::size_t{20}}) {
    lesson.query_std->setValue(settings[k]);
    idle(*window);
    EXPECT_EQ(map->values().size(), frames[k].size());
    for (std::size_t r = 0; r < frames[k].size(); ++r) {
      for (std::size_t c = 0; c < frames[k][r].size(); ++c) {
        const double a = frames[k][r][c], b = map->values()[r][c];
        EXPECT_TRUE((std::isnan(a) && std::isnan(b)) || a == b) << k << ": " << r << "," << c;
      }
    }
  }
  // The speed choice sets the timer: 4x plays about 12 frames a second.
  player->speed()->setCurrentIndex(3);
  EXPECT_EQ(player->speed()->currentText(), "4x");
}

TEST(Animation, BlockSizePlaysFromOneToLAndTheColumnsMerge) {
  auto window = depth_window();
  LessonModel& lesson = window->lesson();
  window->lesson_step(3);  // Block compared with Full at S = 1
  idle(*window);
  Player* player = lesson.block_player();
  player->play();
  player->stop();
  idle(*window);
  HeatmapWidget* block = window->view("depth-attention")->heatmaps()[1];
  std::vector<std::size_t> columns;
  std::vector<int> sizes;
  do {
    idle(*window);
    sizes.push_back(lesson.block_size->value());
    columns.push_back(block->spec().column_labels.size());
  } while (player->advance_once());
  ASSERT_EQ(sizes.size(), 8u);  // S = 1 .. L = 8
  EXPECT_EQ(sizes.front(), 1);
  EXPECT_EQ(sizes.back(), 8);
  // Fewer columns as S grows: the embedding, the blocks and the partial sum.
  EXPECT_GT(columns.front(), columns.back());
  for (std::size_t i = 1; i < columns.size(); ++i) EXPECT_LE(columns[i], columns[i - 1]) << i;
  // The last frame against the static view at S = L.
  const HeatmapSpec last = block->spec();
  lesson.block_size->setValue(1);
  idle(*window);
  lesson.block_size->setValue(8);
  idle(*window);
  EXPECT_TRUE(same_heatmap(block->spec(), last));
}

TEST(Animation, TheAlphaMapPlaysOverTheRunsEvaluationsLiveAndUnveiled) {
  auto window = std::make_unique<MainWindow>(false);
  window->show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(window.get()));
  window->show_view("training");
  auto* view = dynamic_cast<TrainingView*>(window->view("training"));
  ASSERT_NE(view, nullptr);
  auto child_spin = [&](const char* name) { return view->findChild<QSpinBox*>(name); };
  child_spin("train_layers")->setValue(1);
  child_spin("train_d_model")->setValue(16);
  child_spin("train_heads")->setValue(2);
  child_spin("train_ffn")->setValue(32);
  child_spin("train_seq")->setValue(16);
  child_spin("train_batch")->setValue(2);
  child_spin("train_steps")->setValue(40);
  view->findChild<QPushButton*>("train_builtin")->click();
  view->findChild<QPushButton*>("train_start")->click();
  auto* frame = child_spin("train_alpha_frame");
  ASSERT_NE(frame, nullptr);
  // Live: the picker follows the newest evaluation while the run trains.
  ASSERT_TRUE(wait_until([&] { return frame->maximum() >= 1; }, 60000));
  EXPECT_EQ(frame->value(), frame->maximum());
  ASSERT_TRUE(wait_until(
      [&] {
        return view->state() != TrainingView::State::running && window->runs_in_flight() == 0;
      },
      120000));
  for (int i = 0; i < 5; ++i) QApplication::processEvents();
  const int evaluations = frame->maximum() + 1;
  ASSERT_GE(evaluations, 3);
  const HeatmapWidget* map = view->heatmaps()[0];
  const std::string newest = map->title();
  auto* player = view->findChild<Player*>("train_alpha_player");
  ASSERT_NE(player, nullptr);
  player->play();
  player->stop();
  for (int i = 0; i < 3; ++i) QApplication::processEvents();
  EXPECT_EQ(frame->value(), 0);
  EXPECT_NE(map->title().find("evaluation 1 of " + std::to_string(evaluations)), std::string::npos)
      << map->title();
  const auto first = map->values();
  int frames = 1;
  while (player->advance_once()) ++frames;
  EXPECT_EQ(frames, evaluations);
  EXPECT_EQ(map->title(), newest);  // the last frame is the newest map
  // Frame 0 again by hand: the same map the player drew.
  frame->setValue(0);
  EXPECT_NE(map->title().find("evaluation 1 of"), std::string::npos) << map->title();
  ASSERT_EQ(map->values().size(), first.size());
  for (std::size_t r = 0; r < first.size(); ++r) {
    for (std::size_t c = 0; c < first[r].size(); ++c) {
      const double a = first[r][c], b = map->values()[r][c];
      EXPECT_TRUE((std::isnan(a) && std::isnan(b)) || a == b) << r << "," << c;
    }
  }
  for (QWidget* veil : view->findChildren<QWidget*>("stale_overlay")) EXPECT_TRUE(veil->isHidden());
}

}  // namespace test_animation
}  // namespace attnres::gui

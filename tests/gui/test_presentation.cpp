// Presentation mode at a projector's sizes (issue 30 item 5): at 1024 x 768 and 1280 x 720 every
// lesson step's chart is at least 300 x 200 pixels of plot, every heatmap cell at least 12 pixels,
// the lesson bar's text at the presentation scale and not cut, every tab's name in view, the axis
// titles of the step's chart drawn in full, and the step's "look for" as a callout on its chart.
#include <gtest/gtest.h>

#include <QLabel>
#include <QTabBar>
#include <QTabWidget>
#include <QTest>
#include <QtCharts/QAbstractAxis>
#include <QtCharts/QChart>
#include <memory>
#include <string>
#include <vector>

#include "chart_render.hpp"
#include "gui_wait.hpp"
#include "lesson.hpp"
#include "main_window.hpp"
#include "presentation_stage.hpp"
#include "widgets.hpp"

namespace attnres::gui {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_presentation {

void idle(MainWindow& window) {
  ASSERT_TRUE(settle_runs(window));
}

// A heatmap's smallest cell side in pixels.
double cell_side(const HeatmapWidget* map) {
  const QRectF cells = map->cells_rect();
  const auto rows = map->values().size();
  const auto columns = rows ? map->values()[0].size() : 0;
  if (rows == 0 || columns == 0) return 0;
  return std::min(cells.width() / static_cast<double>(columns),
                  cells.height() / static_cast<double>(rows));
}

void expect_readable_chart(const ChartPanel* panel, const std::string& what) {
  const QRectF plot = panel->chart()->plotArea();
  EXPECT_GE(plot.width(), 300) << what;
  EXPECT_GE(plot.height(), 200) << what;
  const auto x_axes = panel->chart()->axes(Qt::Horizontal);
  ASSERT_FALSE(x_axes.empty()) << what;
  EXPECT_TRUE(x_axes.front()->isTitleVisible()) << what << ": the x axis title was dropped";
  EXPECT_EQ(x_axes.front()->titleText().toStdString(), panel->spec().x_label) << what;
}

class Presentation : public ::testing::TestWithParam<QSize> {};

TEST_P(Presentation, EveryStepIsReadableFromTheBack) {
  const QSize size = GetParam();
  auto window = std::make_unique<MainWindow>(false);
  window->resize(size);
  window->show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(window.get()));
  const double normal_points = window->font().pointSizeF();
  window->recompute_all();
  idle(*window);
  window->set_presentation(true);
  const auto& steps = lesson_steps();
  auto* lesson_text = window->findChild<QLabel*>("lesson_text");
  ASSERT_NE(lesson_text, nullptr);
  auto* tabs = window->findChild<QTabWidget*>();
  ASSERT_NE(tabs, nullptr);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE(std::to_string(size.width()) + "x" + std::to_string(size.height()) +
                 ", lesson step " + std::to_string(i + 1) + ": " + steps[i].title);
    window->lesson_step(static_cast<int>(i));
    idle(*window);
    ASSERT_EQ(window->size(), size);
    // The lesson bar at the presentation scale, its text whole.
    EXPECT_GE(lesson_text->font().pointSizeF(), 1.35 * normal_points);
    EXPECT_GE(lesson_text->height(), lesson_text->heightForWidth(lesson_text->width()));
    // Every tab's name in view (no scroll arrows hiding one).
    QTabBar* bar = tabs->tabBar();
    EXPECT_LE(bar->tabRect(bar->count() - 1).right(), bar->width());
    View* view = window->current_view();
    PresentationStage* stage = window->stage();
    ASSERT_NE(stage, nullptr);
    if (!steps[i].focus.empty()) {
      ASSERT_TRUE(stage->isVisible()) << "the step's chart " << steps[i].focus << " is not staged";
      EXPECT_EQ(stage->parentWidget(), view);
      if (stage->chart()->isVisible()) {
        EXPECT_EQ(stage->chart()->spec().id, steps[i].focus);
        expect_readable_chart(stage->chart(), steps[i].focus);
        // The callout hides neither an axis (its ticks and title lie outside the plot area) nor
        // the marker's readout.
        const QPointF origin = stage->chart()->mapTo(stage, QPoint(0, 0));
        const QRectF plot = stage->chart()->chart()->plotArea().translated(origin);
        EXPECT_TRUE(plot.contains(QRectF(stage->callout()->geometry())))
            << "the callout covers an axis";
        const QRectF readout =
            charts::marker_readout_rect(stage->chart()->chart()).translated(origin);
        if (!readout.isEmpty())
          EXPECT_FALSE(readout.intersects(QRectF(stage->callout()->geometry())))
              << "the callout hides the marker's readout";
      } else {
        ASSERT_TRUE(stage->heatmap()->isVisible());
        EXPECT_EQ(stage->heatmap()->spec().id, steps[i].focus);
        EXPECT_GE(cell_side(stage->heatmap()), 12.0);
      }
      // The callout says what to look for, inside the stage.
      const QLabel* callout = stage->callout();
      EXPECT_TRUE(callout->isVisible());
      EXPECT_TRUE(callout->text().contains(QString::fromStdString(steps[i].look_for).left(30)));
      EXPECT_TRUE(stage->rect().contains(callout->geometry())) << "the callout is cut";
      EXPECT_GE(callout->height(), callout->heightForWidth(callout->width()));
    } else {
      EXPECT_FALSE(stage->isVisible());
      // The whole tab: every chart and heatmap shown is big enough.
      // (dynamic_cast: the widgets have no Q_OBJECT of their own, so findChildren<T*> alone
      // returns every QWidget / QChartView)
      for (auto* widget : view->findChildren<QWidget*>()) {
        if (!widget->isVisible()) continue;
        if (auto* map = dynamic_cast<HeatmapWidget*>(widget); map && !map->values().empty())
          EXPECT_GE(cell_side(map), 12.0) << map->title();
        if (auto* panel = dynamic_cast<ChartPanel*>(widget))
          expect_readable_chart(panel, panel->spec().id);
      }
    }
  }
  // Leaving presentation mode takes the stage away and the full tab names back.
  window->set_presentation(false);
  EXPECT_FALSE(window->stage()->isVisible());
  EXPECT_EQ(tabs->tabText(0), window->views()[0]->title());
}

INSTANTIATE_TEST_SUITE_P(Projectors, Presentation,
                         ::testing::Values(QSize(1024, 768), QSize(1280, 720)),
                         [](const ::testing::TestParamInfo<QSize>& info) {
                           return std::to_string(info.param.width()) + "x" +
                                  std::to_string(info.param.height());
                         });

}  // namespace test_presentation
}  // namespace attnres::gui

// The 2×2 duality view (issue 30 item 2): depth (the standard residual's all-ones M | the picked
// scheme's M) above sequence (the running sum | one head's causal softmax attention), one colour
// scale, the cut k boxed on all four with its rank and leading singular values, a token picker and
// linked hover. Checked against the core's builders and closed forms, through the real window.
#include <gtest/gtest.h>

#include <Eigen/SVD>
#include <QComboBox>
#include <QLabel>
#include <QMouseEvent>
#include <QSpinBox>
#include <QTabWidget>
#include <QTest>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "attnres/forward.hpp"
#include "attnres/model_charts.hpp"
#include "duality_results.hpp"
#include "gui_wait.hpp"
#include "lesson.hpp"
#include "lesson_model.hpp"
#include "main_window.hpp"
#include "model_view.hpp"
#include "widgets.hpp"

namespace attnres::gui {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_duality_quad {

void idle(MainWindow& window) {
  ASSERT_TRUE(settle_runs(window));
}

HeatmapWidget* map(View* view, const char* name) {
  auto* widget = view->findChild<HeatmapWidget*>(name);
  EXPECT_NE(widget, nullptr) << name;
  return widget;
}

// The lesson's step 6: the random 4-layer model (L = 8), query std 0.5, Full AttnRes.
std::unique_ptr<MainWindow> duality_window() {
  auto window = std::make_unique<MainWindow>(false);
  window->resize(1280, 720);
  window->show();
  EXPECT_TRUE(QTest::qWaitForWindowExposed(window.get()));
  window->recompute_all();
  idle(*window);
  window->lesson_step(5);
  idle(*window);
  EXPECT_EQ(window->current_view()->name(), "duality");
  return window;
}

// The values of a map below the diagonal (where M is defined).
void expect_same_values(const HeatmapSpec& shown, const HeatmapSpec& built) {
  ASSERT_EQ(shown.values.size(), built.values.size());
  for (std::size_t r = 0; r < shown.values.size(); ++r) {
    ASSERT_EQ(shown.values[r].size(), built.values[r].size());
    for (std::size_t c = 0; c < shown.values[r].size(); ++c) {
      const double a = shown.values[r][c], b = built.values[r][c];
      if (std::isnan(b)) {
        EXPECT_TRUE(std::isnan(a)) << r << "," << c;
      } else {
        EXPECT_DOUBLE_EQ(a, b) << r << "," << c;
      }
    }
  }
}

TEST(DualityQuad, FourEqualMapsAtOneScaleWithTheCutBoxed) {
  auto window = duality_window();
  View* duality = window->view("duality");
  HeatmapWidget* standard = map(duality, "duality_depth_standard");
  HeatmapWidget* scheme = map(duality, "duality_depth_scheme");
  HeatmapWidget* running = map(duality, "duality_sequence_running");
  HeatmapWidget* attention = map(duality, "duality_sequence_attention");
  ASSERT_TRUE(standard && scheme && running && attention);
  // Equal size, one colour scale.
  for (HeatmapWidget* m : {scheme, running, attention}) {
    EXPECT_LE(std::abs(m->width() - standard->width()), 2);
    EXPECT_LE(std::abs(m->height() - standard->height()), 2);
    EXPECT_EQ(m->spec().low, standard->spec().low);
    EXPECT_EQ(m->spec().high, standard->spec().high);
  }
  // Depth, left: the standard residual's M is the all-ones lower triangle (its forward pass).
  const auto& ones = standard->values();
  ASSERT_EQ(ones.size(), 9u);  // reads 0 .. L = 8
  for (std::size_t r = 0; r < ones.size(); ++r) {
    for (std::size_t c = 0; c <= r; ++c) EXPECT_DOUBLE_EQ(ones[r][c], 1.0) << r << "," << c;
  }
  // The cut k = 3 (the default) on all four: the block M[k:, :k], labelled with rank and σ.
  auto* cut = duality->findChild<QSpinBox*>("duality_cut");
  ASSERT_NE(cut, nullptr);
  for (int k = 1; k <= 8; ++k) {
    SCOPED_TRACE("cut k = " + std::to_string(k));
    cut->setValue(k);
    idle(*window);
    ASSERT_FALSE(standard->spec().boxes.empty());
    const HeatmapBox& box = standard->spec().boxes.front();
    EXPECT_EQ(box.first_row, k);
    EXPECT_EQ(box.rows, 9 - k);
    EXPECT_EQ(box.first_column, 0);
    EXPECT_EQ(box.columns, k);
    // A block of ones (9 - k) x k has rank 1 and σ1 = sqrt(k (9 - k)): the closed form.
    char sigma[32];
    std::snprintf(sigma, sizeof sigma, "%.3g", std::sqrt(k * (9.0 - k)));
    EXPECT_EQ(box.label, "k = " + std::to_string(k) + ": rank 1 (σ " + sigma + ")");
    // Full AttnRes with random queries reaches min(k, L + 1 - k) (the lesson's step 5).
    ASSERT_FALSE(scheme->spec().boxes.empty());
    EXPECT_NE(scheme->spec().boxes.front().label.find("rank " + std::to_string(std::min(k, 9 - k))),
              std::string::npos)
        << scheme->spec().boxes.front().label;
    // The sequence side (T = 6 tokens): the cut clamped to 1 .. 5; the running sum has rank 1.
    const int ks = std::min(k, 5);
    ASSERT_FALSE(running->spec().boxes.empty());
    EXPECT_EQ(running->spec().boxes.front().first_row, ks);
    EXPECT_EQ(
        running->spec().boxes.front().label.rfind("k = " + std::to_string(ks) + ": rank 1", 0), 0u);
    ASSERT_FALSE(attention->spec().boxes.empty());
    EXPECT_EQ(attention->spec().boxes.front().columns, ks);
  }
  const QString summary = duality->findChild<QLabel*>("duality_cut_summary")->text();
  EXPECT_TRUE(summary.contains("standard residual rank 1")) << summary.toStdString();
}

// The maps against the core's builders on the same model: the picked scheme's M (token mean and
// one token's M_t), the sequence head's attention and the running sum; the cut's singular values
// against an SVD of the same block.
TEST(DualityQuad, MapsAreTheCoresAndTheTokenPickerShowsOneTokensM) {
  auto window = duality_window();
  View* duality = window->view("duality");
  const auto snapshot = window->lesson().snapshot();
  const auto built = snapshot.build();
  const auto tokens = snapshot.token_ids(built->config);
  ASSERT_EQ(built->config.attn_res.mode, ResidualMode::full);  // the random model: Full AttnRes
  const ForwardTrace trace = scheme_trace(
      *built, tokens, [](std::size_t, std::size_t) { return true; }, true);
  HeatmapWidget* scheme = map(duality, "duality_depth_scheme");
  expect_same_values(scheme->spec(), mixing_heatmap(trace, "Full AttnRes"));
  auto* token = duality->findChild<QComboBox*>("duality_token");
  ASSERT_NE(token, nullptr);
  ASSERT_EQ(token->count(), 1 + static_cast<int>(tokens.size()));
  token->setCurrentIndex(token->findData(2));
  idle(*window);
  EXPECT_NE(scheme->title().find("t2"), std::string::npos) << scheme->title();
  expect_same_values(scheme->spec(), mixing_heatmap(trace, "Full AttnRes", 2));
  // The cut's σ are those of the block of M_t2 below it.
  auto* cut = duality->findChild<QSpinBox*>("duality_cut");
  cut->setValue(4);
  idle(*window);
  const Eigen::MatrixXd& m = trace.mixing_per_token[2];
  const Eigen::JacobiSVD<Eigen::MatrixXd> svd(m.bottomLeftCorner(m.rows() - 4, 4));
  char sigma[32];
  std::snprintf(sigma, sizeof sigma, "(σ %.3g", svd.singularValues()(0));
  EXPECT_NE(scheme->spec().boxes.front().label.find(sigma), std::string::npos)
      << scheme->spec().boxes.front().label;
  // The sequence maps outline the token's row.
  HeatmapWidget* attention = map(duality, "duality_sequence_attention");
  ASSERT_EQ(attention->spec().boxes.size(), 2u);
  EXPECT_EQ(attention->spec().boxes[1].first_row, 2);
  EXPECT_EQ(attention->spec().boxes[1].rows, 1);
  // ... and are the core's: the running sum's lower triangle of ones.
  expect_same_values(map(duality, "duality_sequence_running")->spec(),
                     running_sum_heatmap(static_cast<int>(tokens.size())));
}

// Linked hover: a depth cell names its source and its norm and rings the same cell of its twin; a
// sequence cell names its token.
TEST(DualityQuad, LinkedHoverNamesSourcesAndTokens) {
  auto window = duality_window();
  View* duality = window->view("duality");
  HeatmapWidget* standard = map(duality, "duality_depth_standard");
  HeatmapWidget* scheme = map(duality, "duality_depth_scheme");
  const QPointF cell = standard->cell_center(5, 3);  // read 5 of source v3
  QMouseEvent move(QEvent::MouseMove, cell, standard->mapToGlobal(cell), Qt::NoButton, Qt::NoButton,
                   Qt::NoModifier);
  QApplication::sendEvent(standard, &move);
  EXPECT_EQ(scheme->marked_cell(), std::make_pair(5, 3));
  const std::string text = standard->readout_at(cell).toStdString();
  EXPECT_NE(text.find("v3 (attention output of layer 2, RMS "), std::string::npos) << text;
  HeatmapWidget* attention = map(duality, "duality_sequence_attention");
  const std::string token = attention->readout_at(attention->cell_center(2, 1)).toStdString();
  EXPECT_NE(token.find("(id 42)"), std::string::npos) << token;  // tokens "1 7 42 7 99 3"
  QEvent leave(QEvent::Leave);
  QApplication::sendEvent(standard, &leave);
  EXPECT_EQ(scheme->marked_cell(), std::make_pair(-1, -1));
}

}  // namespace test_duality_quad
}  // namespace attnres::gui

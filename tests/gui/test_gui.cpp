// Headless tests of attnres-lab (offscreen platform, set before the application exists).
#include <gtest/gtest.h>

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSpinBox>
#include <QTabBar>
#include <QTableView>
#include <QTableWidget>
#include <QThread>
#include <QtCharts/QBarSet>
#include <QtCharts/QLineSeries>
#include <QtCharts/QStackedBarSeries>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <set>

#include "attnres/atomic_file.hpp"
#include "attnres/block_layout.hpp"
#include "attnres/calibration.hpp"
#include "attnres/cancel.hpp"
#include "attnres/colormap.hpp"
#include "attnres/cost.hpp"
#include "attnres/engine.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "attnres/model_charts.hpp"
#include "attnres/pipeline.hpp"
#include "attnres/plan.hpp"
#include "attnres/published_quality.hpp"
#include "attnres/rank_memory.hpp"
#include "attnres/report.hpp"
#include "attnres/strategy.hpp"
#include "attnres/sweep.hpp"
#include "attnres/trainer.hpp"
#include "cost_panels.hpp"
#include "decision_panel.hpp"
#include "explorer_state.hpp"
#include "gui_wait.hpp"
#include "lesson_model.hpp"
#include "main_window.hpp"
#include "memory_panel.hpp"
#include "model_support.hpp"
#include "published_models.hpp"
#include "step_panel.hpp"
#include "training_view.hpp"

namespace attnres::gui {
namespace {

namespace fs = std::filesystem;

void settle() {
  for (int i = 0; i < 5; ++i) QApplication::processEvents();
}

// Points ATTNRES_MODELS_DIR at `dir` (empty: no shipped models) for the life of the object, then
// restores what was there. The model views read it when the window is built.
class ModelsDirectory {
 public:
  explicit ModelsDirectory(const fs::path& dir)
      : had_(qEnvironmentVariableIsSet("ATTNRES_MODELS_DIR")), old_(qgetenv("ATTNRES_MODELS_DIR")) {
    qputenv("ATTNRES_MODELS_DIR", QByteArray::fromStdString(dir.string()));
  }
  ~ModelsDirectory() {
    if (had_) {
      qputenv("ATTNRES_MODELS_DIR", old_);
    } else {
      qunsetenv("ATTNRES_MODELS_DIR");
    }
  }
  ModelsDirectory(const ModelsDirectory&) = delete;
  ModelsDirectory& operator=(const ModelsDirectory&) = delete;

 private:
  bool had_;
  QByteArray old_;
};

TEST(Gui, EveryViewBuildsAndDraws) {
  MainWindow window(true);
  window.recompute_all();
  std::vector<std::string> names;
  for (View* view : window.views()) names.push_back(view->name());
  EXPECT_EQ(names, (std::vector<std::string>{"cost", "depth-attention", "magnitudes", "pipeline",
                                             "duality", "scaling", "training"}));
  for (View* view : window.views()) {
    window.show_view(view->name());
    EXPECT_EQ(window.current_view(), view);
    EXPECT_FALSE(window.export_titles().empty()) << view->name();
  }
  EXPECT_EQ(window.error_text(), "");
}

TEST(Gui, ChangingBlocksMovesTheCostChartsMarker) {
  MainWindow window(true);
  View* cost = window.view("cost");
  cost->recompute();
  EXPECT_EQ(cost->charts().front().marker_x, 8.0);
  auto* blocks = cost->findChild<QSpinBox*>("blocks");
  ASSERT_NE(blocks, nullptr);
  blocks->setValue(16);
  settle();  // the change is applied on the next event-loop pass
  EXPECT_EQ(cost->charts().front().marker_x, 16.0);
  // An impossible setting shows the engine's message and keeps the last charts.
  blocks->setValue(200);
  settle();
  EXPECT_NE(window.error_text().find("blocks N = 200 exceeds L = 128"), std::string::npos)
      << window.error_text();
  EXPECT_EQ(cost->charts().front().marker_x, 16.0);
}

TEST(Gui, CostViewComparesTwoSchemesSideBySide) {
  MainWindow window(true);
  View* cost = window.view("cost");
  cost->recompute();
  auto* a = cost->findChild<QComboBox*>("scheme_a");
  auto* b = cost->findChild<QComboBox*>("scheme_b");
  auto* table = cost->findChild<QTableWidget*>("scheme_comparison");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(table, nullptr);
  auto cell = [table](const std::string& quantity, int column) {
    for (int r = 0; r < table->rowCount(); ++r) {
      if (table->item(r, 0)->text().toStdString() == quantity)
        return table->item(r, column)->text().toStdString();
    }
    return std::string("(no row '" + quantity + "')");
  };
  // Defaults at L = 128, N = 8: Block (N/S + 5)d = 5.5d against Full (S + N)d = 24d.
  EXPECT_EQ(cell("I/O per sublayer (x d)", 1), "5.5");
  EXPECT_EQ(cell("I/O per sublayer (x d)", 2), "24");
  EXPECT_EQ(cell("I/O formula", 2), "(S + N)d");
  b->setCurrentText("full_input_query");
  settle();
  EXPECT_EQ(cell("I/O per sublayer (x d)", 2), "129");  // L·d + d: one-shot plus reading u
  EXPECT_EQ(cell("two-phase", 1), "yes");
  EXPECT_EQ(cell("two-phase", 2), "no");
  // Both schemes are drawn in the I/O chart beside the paper's rows.
  const std::vector<ChartSpec> charts = cost->charts();  // a copy that outlives the loop
  ASSERT_FALSE(charts.empty());
  std::vector<std::string> names;
  for (const auto& series : charts.front().series) names.push_back(series.name);
  EXPECT_NE(std::find(names.begin(), names.end(), "Full, input query"), names.end());
  EXPECT_EQ(window.error_text(), "");
}

// ------------------------------------------------------------------ cost engine v2 tabs
// (strategies, layout, calibration: docs/math.md §3.6, docs/calibration.md)

// The cost explorer's opening inputs (its state as it opens, explorer_state.hpp).
CostInputs cost_view_defaults() {
  return default_explorer_state().model;
}

double cell_value(QTableWidget* table, int row, int column) {
  QTableWidgetItem* item = table->item(row, column);
  return item ? item->text().toDouble() : std::nan("");
}

void type_block_sizes(View* cost, const QString& text) {
  auto* edit = cost->findChild<QLineEdit*>("block_sizes");
  ASSERT_NE(edit, nullptr);
  edit->setText(text);
  emit edit->editingFinished();
  settle();
}

TEST(Gui, CostViewComparesTheFourStrategiesWithTheCoresNumbers) {
  MainWindow window(true);
  View* cost = window.view("cost");
  cost->recompute();
  auto* table = cost->findChild<QTableWidget*>("strategy_comparison");  // bytes and memory
  auto* times = cost->findChild<QTableWidget*>("strategy_time");        // launches and time
  auto* picker = cost->findChild<QComboBox*>("strategy");
  auto* panel = cost->findChild<StrategyPanel*>("strategies_tab");
  ASSERT_NE(table, nullptr);
  ASSERT_NE(times, nullptr);
  ASSERT_NE(picker, nullptr);
  ASSERT_NE(panel, nullptr);
  EXPECT_EQ(picker->count(), static_cast<int>(kStrategyNames.size()));
  for (int i = 0; i < picker->count(); ++i)
    EXPECT_FALSE(picker->itemData(i, Qt::ToolTipRole).toString().isEmpty());
  // Four rows per mode: Block's, then Full's, in kStrategyNames order.
  ASSERT_EQ(table->rowCount(), 8);
  ASSERT_EQ(times->rowCount(), 8);
  for (int r = 0; r < 8; ++r) {
    const std::string name(kStrategyNames[static_cast<std::size_t>(r % 4)].name);
    EXPECT_EQ(table->verticalHeaderItem(r)->text().toStdString(),
              std::string(r < 4 ? "Block" : "Full") + " · " + name);
    EXPECT_EQ(times->verticalHeaderItem(r)->text(), table->verticalHeaderItem(r)->text());
  }
  // Independent checks against the core at the opening inputs (h100, bf16).
  const CostInputs in = cost_view_defaults();
  const Hardware h100 = load_hardware("h100");
  const double vector_bytes = 7168.0 * 131072.0 * 2.0;
  const double unit = panel->unit() == "GB" ? 1e9 : 1e6;
  EXPECT_EQ(panel->unit().toStdString(), "GB");  // T = 128K: one vector is 1.9 GB
  EXPECT_TRUE(table->horizontalHeaderItem(0)->text().contains(panel->unit()));
  const StrategyCost stack_block = strategy_cost(
      Strategy::stack, mode_layout(ResidualMode::block, in), mode_groups(ResidualMode::block, in));
  // The cells print 3 significant digits: within half a unit of the last (<= 5e-3 of the value);
  // percentages 1 decimal: half a unit, 0.05 (and 0.001 for the value's own rounding).
  const double expected_read =
      static_cast<double>(stack_block.forward.read_vectors) * vector_bytes / unit;
  EXPECT_NEAR(cell_value(table, 0, 0), expected_read, expected_read * 5e-3);
  const double expected_bwd_write =
      static_cast<double>(stack_block.backward.write_vectors) * vector_bytes / unit;
  EXPECT_NEAR(cell_value(table, 0, 3), expected_bwd_write, expected_bwd_write * 5e-3);
  EXPECT_EQ(times->item(0, 0)->text().toStdString(),
            std::to_string(stack_block.forward.launches) + " / " +
                std::to_string(stack_block.backward.launches));
  const StrategyStep arena_full =
      strategy_step(Strategy::arena, ResidualMode::full, in, Phase::prefill, true, h100);
  EXPECT_NEAR(cell_value(times, 5, 2), arena_full.overhead_fraction * 100, 0.051);
  const double train_ms = (arena_full.forward.seconds + arena_full.backward.seconds) * 1e3;
  EXPECT_NEAR(cell_value(times, 5, 1), train_ms, train_ms * 5e-3);
  const StrategyStep two_phase_decode =
      strategy_step(Strategy::fused_two_phase, ResidualMode::block, in, Phase::decode, false, h100);
  const double decode_us = two_phase_decode.forward.seconds * 1e6;
  EXPECT_NEAR(cell_value(times, 3, 3), decode_us, decode_us * 5e-3);
  EXPECT_NEAR(cell_value(times, 3, 4), two_phase_decode.overhead_fraction * 100, 0.051);
  // The picked strategy's rows are highlighted; picking another moves the highlight.
  auto bold = [table, times](int r) {
    return table->item(r, 0)->font().bold() && times->item(r, 4)->font().bold();
  };
  const int picked = picker->currentIndex();
  for (int r = 0; r < 8; ++r) EXPECT_EQ(bold(r), r % 4 == picked) << r;
  picker->setCurrentText("stack");
  settle();
  for (int r = 0; r < 8; ++r) EXPECT_EQ(bold(r), r % 4 == 0) << r;
  EXPECT_NE(table->item(0, 1)->background().color(), table->item(1, 1)->background().color());
  auto* summary = cost->findChild<QLabel*>("strategy_summary");
  ASSERT_NE(summary, nullptr);
  EXPECT_TRUE(summary->text().startsWith("<b>stack</b>")) << summary->text().toStdString();
  // Another hardware preset changes the times, not the bytes.
  const QString before_bytes = table->item(0, 0)->text(), before_ms = times->item(0, 1)->text();
  cost->findChild<QComboBox*>("hardware")->setCurrentText("a100");
  settle();
  EXPECT_EQ(table->item(0, 0)->text(), before_bytes);
  EXPECT_NE(times->item(0, 1)->text(), before_ms);
  EXPECT_EQ(window.error_text(), "");
}

// Large models: Full at L = 100000 (the input's limit) lists one read per sublayer; the stack
// strategy's per-source fan-in is one call with a count in the core, so every row is computed.
TEST(Gui, CostViewComparesTheStrategiesOfALargeModel) {
  MainWindow window(true);
  View* cost = window.view("cost");
  auto* sublayers = cost->findChild<QSpinBox*>("sublayers");
  sublayers->setValue(sublayers->maximum());
  settle();
  EXPECT_EQ(window.error_text(), "");
  auto* table = cost->findChild<QTableWidget*>("strategy_comparison");
  auto* times = cost->findChild<QTableWidget*>("strategy_time");
  ASSERT_EQ(table->rowCount(), 8);
  for (int r = 0; r < 8; ++r) {
    EXPECT_GT(cell_value(table, r, 0), 0) << r;
    EXPECT_GT(cell_value(times, r, 1), 0) << r;
  }
}

TEST(Gui, CostViewLayoutTableFollowsUnevenBlocksAndShowsBadLists) {
  MainWindow window(true);
  View* cost = window.view("cost");
  cost->recompute();
  auto* table = cost->findChild<QTableWidget*>("layout_table");
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->rowCount(), 8);  // N = 8 equal blocks of L = 128
  cost->findChild<QSpinBox*>("sublayers")->setValue(12);
  cost->findChild<QSpinBox*>("blocks")->setValue(3);
  cost->findChild<QSpinBox*>("pp")->setValue(3);
  cost->findChild<QSpinBox*>("vpp")->setValue(1);
  settle();
  EXPECT_EQ(window.error_text(), "");
  type_block_sizes(cost, "2,6,4");
  EXPECT_EQ(window.error_text(), "");
  // Chunks of 4 sublayers: block 2 (sublayers 3-8) runs in chunks 0 and 1, the others in one.
  ASSERT_EQ(table->rowCount(), 3);
  EXPECT_EQ(table->item(1, 1)->text().toStdString(), "3 – 8");
  EXPECT_EQ(table->item(1, 5)->text().toStdString(), "0 – 1");
  EXPECT_EQ(table->item(0, 7)->text().toStdString(), "");
  EXPECT_EQ(table->item(1, 7)->text().toStdString(), "✓");
  EXPECT_EQ(table->item(2, 7)->text().toStdString(), "");
  const std::vector<LayoutBlockRow> rows = layout_rows(BlockLayout{{2, 6, 4}}, 3, 1);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(table->item(r, 4)->text().toStdString(),
              rows[static_cast<std::size_t>(r)].sources_min ==
                      rows[static_cast<std::size_t>(r)].sources_max
                  ? std::to_string(rows[static_cast<std::size_t>(r)].sources_min)
                  : std::to_string(rows[static_cast<std::size_t>(r)].sources_min) + " – " +
                        std::to_string(rows[static_cast<std::size_t>(r)].sources_max));
  }
  // The list decides N: shown, not editable.
  auto* blocks = cost->findChild<QSpinBox*>("blocks");
  EXPECT_EQ(blocks->value(), 3);
  EXPECT_FALSE(blocks->isEnabled());
  // The strategies follow the list too (Block's sources: the uneven layout).
  auto* strategies = cost->findChild<StrategyPanel*>("strategies_tab");
  ASSERT_NE(strategies, nullptr);
  ASSERT_EQ(strategies->comparison().rows.size(), 8u);
  EXPECT_EQ(strategies->comparison().block_layout, "2, 6, 4");
  // A list that does not sum to L: the engine's message on the line edit, the table kept.
  type_block_sizes(cost, "2,6,5");
  EXPECT_NE(window.error_text().find("block sizes sum to 13"), std::string::npos)
      << window.error_text();
  auto* edit = cost->findChild<QLineEdit*>("block_sizes");
  const auto fields = cost->error_fields();
  EXPECT_NE(std::find(fields.begin(), fields.end(), edit), fields.end());
  EXPECT_EQ(table->rowCount(), 3);
  // A list that does not parse: the parser's message.
  type_block_sizes(cost, "2,x");
  EXPECT_NE(window.error_text().find("block sizes"), std::string::npos) << window.error_text();
  // Cleared: N decides again and the app goes on.
  type_block_sizes(cost, "");
  EXPECT_EQ(window.error_text(), "");
  EXPECT_TRUE(blocks->isEnabled());
  EXPECT_EQ(table->rowCount(), 3);
  // K layers per block: S = 2K (K = 2 at L = 12: three blocks of 4, no layer split).
  auto* k = cost->findChild<QSpinBox*>("block_layers");
  ASSERT_NE(k, nullptr);
  k->setValue(1);
  settle();
  EXPECT_EQ(window.error_text(), "");
  EXPECT_EQ(table->rowCount(), 6);
  EXPECT_EQ(blocks->value(), 6);
  for (int r = 0; r < 6; ++r) EXPECT_EQ(table->item(r, 8)->text().toStdString(), "") << r;
  k->setValue(7);  // more than the model's 6 layers
  settle();
  EXPECT_NE(window.error_text().find("layers per block K = 7"), std::string::npos)
      << window.error_text();
  const auto k_fields = cost->error_fields();
  EXPECT_NE(std::find(k_fields.begin(), k_fields.end(), k), k_fields.end());
  k->setValue(0);
  settle();
  EXPECT_EQ(window.error_text(), "");
  EXPECT_EQ(table->rowCount(), 6);  // N as K left it
  // An odd S splits layers: N = 4 of L = 12 gives S = 3.
  blocks->setValue(4);
  settle();
  ASSERT_EQ(table->rowCount(), 4);
  EXPECT_EQ(table->item(0, 8)->text().toStdString(), "✓");
  // Setting N (a lesson step, a scenario) makes N decide again: the list is cleared.
  type_block_sizes(cost, "2,6,4");
  ASSERT_EQ(table->rowCount(), 3);
  blocks->setValue(2);
  settle();
  EXPECT_EQ(cost->findChild<QLineEdit*>("block_sizes")->text(), "");
  EXPECT_TRUE(blocks->isEnabled());
  EXPECT_EQ(table->rowCount(), 2);
  EXPECT_EQ(window.error_text(), "");
}

TEST(Gui, CostViewCalibrationShowsEveryBuiltinPoint) {
  MainWindow window(true);
  View* cost = window.view("cost");
  cost->recompute();
  auto* table = cost->findChild<QTableWidget*>("calibration_table");
  ASSERT_NE(table, nullptr);
  const std::vector<CalibrationRow> rows = evaluate_calibration(builtin_calibration());
  ASSERT_FALSE(rows.empty());
  ASSERT_EQ(table->rowCount(), static_cast<int>(rows.size()));
  for (int r = 0; r < table->rowCount(); ++r) {
    const CalibrationRow& row = rows[static_cast<std::size_t>(r)];
    EXPECT_EQ(table->item(r, 0)->text().toStdString(), row.point.id);
    EXPECT_EQ(table->item(r, 1)->text().toStdString(), row.point.measured_text);
    EXPECT_TRUE(table->item(r, 0)->toolTip().contains(
        QString::fromStdString(row.point.assumptions).toHtmlEscaped()));
  }
  // The chart: one point per row (|measured|, |modelled|), the diagonal, exported with the rest.
  const ChartSpec chart = cost->charts().back();
  EXPECT_EQ(chart.id, "calibration");
  EXPECT_TRUE(chart.log_x && chart.log_y);
  std::size_t points = 0;
  for (const auto& series : chart.series)
    if (series.style == ChartSeries::Style::scatter) points += series.points.size();
  EXPECT_EQ(points, rows.size());
  auto* chart_panel = cost->findChild<CalibrationChart*>("calibration_chart");
  ASSERT_NE(chart_panel, nullptr);
  EXPECT_EQ(chart_panel->labels().size(), rows.size());
  const CalibrationError error = calibration_error(rows);
  auto* summary = cost->findChild<QLabel*>("calibration_summary");
  ASSERT_NE(summary, nullptr);
  EXPECT_TRUE(summary->text().contains(QString::fromStdString(error.worst_id)));
  // The calibration scenario (Kimi Linear 48B: K = 3 layers per block) opens with N = 9 shown and
  // K off, and its [implementation] strategy picked.
  ASSERT_TRUE(window.open_scenario(fs::path(ATTNRES_SCENARIOS_DIR) / "calibration.toml"));
  settle();
  EXPECT_EQ(window.error_text(), "");
  EXPECT_EQ(cost->findChild<QSpinBox*>("blocks")->value(), 9);
  EXPECT_EQ(cost->findChild<QSpinBox*>("block_layers")->value(), 0);
  EXPECT_EQ(cost->findChild<QTableWidget*>("layout_table")->rowCount(), 9);
  const Scenario scenario = load_scenario(fs::path(ATTNRES_SCENARIOS_DIR) / "calibration.toml");
  EXPECT_EQ(cost->findChild<QComboBox*>("strategy")->currentText().toStdString(),
            to_string(scenario.strategy));
}

// The new tabs at the smallest supported window (1024 x 700): drawn, the calibration labels apart.
// ATTNRES_GUI_SHOTS=DIR keeps the screenshots there.
TEST(Gui, CostViewTabsDrawAt1024x700) {
  test::TempDir temp;
  const QByteArray keep = qgetenv("ATTNRES_GUI_SHOTS");
  const fs::path dir = keep.isEmpty() ? temp.path() : fs::path(keep.toStdString());
  fs::create_directories(dir);
  MainWindow window(true);
  window.recompute_all();
  window.show_view("cost");
  window.resize(1024, 700);
  window.show();
  settle();
  View* cost = window.view("cost");
  auto* tabs = cost->findChild<QTabBar*>("cost_tabs");
  ASSERT_NE(tabs, nullptr);
  // charts, strategies, layout, calibration, memory, step, decision
  ASSERT_EQ(tabs->count(), 7);
  for (int i = 0; i < tabs->count(); ++i) {
    tabs->setCurrentIndex(i);
    settle();
    const QImage image = window.grab().toImage();
    const fs::path png = dir / ("cost-" + tabs->tabText(i).toLower().toStdString() + ".png");
    ASSERT_TRUE(image.save(QString::fromStdString(png.string()), "PNG"));
    std::set<QRgb> colours;
    for (int y = 0; y < image.height(); y += 7) {
      for (int x = 0; x < image.width(); x += 7) colours.insert(image.pixel(x, y));
    }
    EXPECT_GT(colours.size(), 20u) << tabs->tabText(i).toStdString() << " looks blank";
  }
  // The layout of an uneven list against three stages, then a list that does not sum to L.
  auto save = [&](const std::string& name) {
    settle();
    const QImage image = window.grab().toImage();
    EXPECT_TRUE(image.save(QString::fromStdString((dir / name).string()), "PNG")) << name;
  };
  tabs->setCurrentIndex(2);
  cost->findChild<QSpinBox*>("sublayers")->setValue(12);
  cost->findChild<QSpinBox*>("blocks")->setValue(3);
  cost->findChild<QSpinBox*>("pp")->setValue(3);
  cost->findChild<QSpinBox*>("vpp")->setValue(1);
  type_block_sizes(cost, "2,6,4");
  save("cost-layout-uneven.png");
  type_block_sizes(cost, "2,6,5");
  save("cost-layout-error.png");
  EXPECT_NE(window.error_text(), "");
  type_block_sizes(cost, "");
  EXPECT_EQ(window.error_text(), "");
  auto* chart = cost->findChild<CalibrationChart*>("calibration_chart");
  ASSERT_NE(chart, nullptr);
  ASSERT_FALSE(chart->labels().empty());
  for (std::size_t i = 0; i < chart->labels().size(); ++i) {
    EXPECT_FALSE(chart->label_rect(i).isEmpty()) << i;
    for (std::size_t j = 0; j < i; ++j)
      EXPECT_FALSE(chart->label_rect(i).intersects(chart->label_rect(j)))
          << chart->labels()[i].text.toStdString() << " covers "
          << chart->labels()[j].text.toStdString();
  }
  EXPECT_EQ(window.error_text(), "");
}

// ------------------------------------------------------------------ memory per rank
// (docs/math.md §3.7): the architecture, MoE and parallelism inputs and the Memory tab.

void set_spin(View* view, const char* name, int value) {
  auto* box = view->findChild<QSpinBox*>(name);
  ASSERT_NE(box, nullptr) << name;
  box->setValue(value);
  ASSERT_EQ(box->value(), value) << name << ": outside the spin box's range";
}

void set_choice(View* view, const char* name, const QString& value) {
  auto* combo = view->findChild<QComboBox*>(name);
  ASSERT_NE(combo, nullptr) << name;
  ASSERT_GE(combo->findText(value), 0) << name << " has no " << value.toStdString();
  combo->setCurrentText(value);
}

// The 61-layer MoE (DeepSeek-V3 shape: MLA, 256 routed experts) on 8 pipeline stages of H100s,
// set through the cost explorer's widgets; the same inputs built directly.
void set_moe_61(View* cost) {
  set_spin(cost, "sublayers", 122);  // 61 transformer layers
  set_spin(cost, "d_model", 7168);
  set_spin(cost, "blocks", 8);
  set_choice(cost, "attention", "mla");
  set_spin(cost, "heads", 128);
  set_spin(cost, "head_dim", 128);
  set_spin(cost, "q_latent", 1536);
  set_spin(cost, "ffn", 18432);
  set_spin(cost, "experts", 256);
  set_spin(cost, "active", 8);
  set_spin(cost, "shared", 1);
  set_spin(cost, "expert_ffn", 2048);
  set_spin(cost, "dense_layers", 3);
  set_spin(cost, "vocab", 129280);
  set_spin(cost, "pp", 8);
  set_spin(cost, "vpp", 2);
  set_spin(cost, "tokens", 131072);
  set_choice(cost, "hardware", "h100");
}

CostInputs moe_61_inputs() {
  CostInputs in = test::deepseek_v3_shape();
  in.pp = 8;
  in.vpp = 2;
  in.tokens = 131072;
  in.batch = 1;       // the explorer's opening batch,
  in.seq_shards = 8;  // prefill shards
  in.chunk = 16384;   // and chunk (they do not change the memory per rank)
  return in;
}

// The stacked totals the Memory chart draws, in bytes, one per bar.
std::vector<double> drawn_totals(MemoryChart* chart) {
  std::vector<double> totals;
  QStackedBarSeries* bars = nullptr;
  for (QAbstractSeries* series : chart->chart()->series())
    if (auto* stacked = qobject_cast<QStackedBarSeries*>(series)) bars = stacked;
  if (!bars) return totals;
  for (QBarSet* set : bars->barSets()) {
    if (totals.empty()) totals.assign(static_cast<std::size_t>(set->count()), 0.0);
    for (int i = 0; i < set->count(); ++i) totals[static_cast<std::size_t>(i)] += set->at(i) * 1e9;
  }
  return totals;
}

TEST(Gui, MemoryTabSaysWhetherTheMoeFitsAndDrawsThePeakRank) {
  MainWindow window(true);
  View* cost = window.view("cost");
  cost->recompute();
  auto* verdict = cost->findChild<QLabel*>("memory_verdict");
  auto* chart = cost->findChild<MemoryChart*>("memory_chart");
  auto* table = cost->findChild<QTableView*>("memory_table");
  auto* assumptions = cost->findChild<QLabel*>("memory_assumptions");
  ASSERT_NE(verdict, nullptr);
  ASSERT_NE(chart, nullptr);
  ASSERT_NE(table, nullptr);
  ASSERT_NE(assumptions, nullptr);
  // Every new input is there, with the table's help as its tooltip.
  for (const CostInputField& f : cost_input_fields()) {
    if (f.key == "layers" || f.key == "block_size") continue;  // given as sublayers and blocks
    auto* box = cost->findChild<QSpinBox*>(QString::fromUtf8(f.key.data(), int(f.key.size())));
    ASSERT_NE(box, nullptr) << f.key;
    EXPECT_TRUE(box->toolTip().startsWith(QString::fromUtf8(f.help.data(), int(f.help.size()))))
        << f.key;
  }
  for (const CostInputChoice& c : cost_input_choices()) {
    auto* combo = cost->findChild<QComboBox*>(QString::fromUtf8(c.key.data(), int(c.key.size())));
    ASSERT_NE(combo, nullptr) << c.key;
    EXPECT_EQ(combo->count(), static_cast<int>(c.names.size())) << c.key;
    EXPECT_EQ(combo->toolTip().toStdString(), std::string(c.help)) << c.key;
  }

  set_moe_61(cost);
  settle();
  ASSERT_EQ(window.error_text(), "");
  // The engine's numbers for the same inputs, the explorer's strategy (its saved tensors count)
  // and micro-batches.
  MemorySettings settings;
  settings.schedule = default_pipeline_schedule(2);
  settings.capacity_bytes = load_hardware("h100").memory_bytes;
  settings.strategy = parse_strategy(
      cost->findChild<QComboBox*>("strategy")->currentText().toStdString(), "strategy");
  settings.microbatches = cost->findChild<QSpinBox*>("microbatches")->value();
  const RankMemory alone = peak_rank_memory(resolve_cost_inputs(moe_61_inputs()), settings);
  ASSERT_FALSE(alone.fits());
  EXPECT_NE(verdict->text().toStdString().find("does not fit"), std::string::npos)
      << verdict->text().toStdString();
  EXPECT_NE(verdict->text().toStdString().find(fit_verdict(alone)), std::string::npos)
      << verdict->text().toStdString();
  EXPECT_EQ(table->model()->rowCount(), 8);  // one row per pipeline rank

  // Spread over t = 8, c = 8, e = 64, D = 8 with ZeRO 1 and full recompute: it fits.
  set_spin(cost, "tp", 8);
  set_spin(cost, "cp", 8);
  set_spin(cost, "ep", 64);
  set_spin(cost, "dp", 8);
  set_spin(cost, "zero", 1);
  set_choice(cost, "recompute", "full");
  settle();
  ASSERT_EQ(window.error_text(), "");
  CostInputs spread = moe_61_inputs();
  spread.tp = 8;
  spread.cp = 8;
  spread.ep = 64;
  spread.dp = 8;
  spread.zero = 1;
  spread.recompute = RecomputePolicy::full;
  const RankMemory peak = peak_rank_memory(resolve_cost_inputs(spread), settings);
  ASSERT_TRUE(peak.fits()) << fit_verdict(peak);
  const std::string text = verdict->text().toStdString();
  EXPECT_NE(text.find("fits: "), std::string::npos) << text;
  EXPECT_EQ(text.find("does not fit"), std::string::npos) << text;
  EXPECT_NE(text.find(fit_verdict(peak)), std::string::npos) << text;
  // Green when it fits.
  EXPECT_NE(verdict->styleSheet().indexOf("#1d5e20"), -1);
  const std::vector<double> totals = drawn_totals(chart);
  ASSERT_EQ(totals.size(), 8u);
  const double largest = *std::max_element(totals.begin(), totals.end());
  // A bar is its parts stacked: each part / 1e9 and back (2 roundings), their sum in another
  // order (a dozen parts at most): ~14 u; 32 u.
  EXPECT_TRUE(test::near_relative(largest, peak.total(), test::roundoffs<double>(32), 0.0, "bar"));
  // The capacity line at the H100's 80 GB, and the table's largest total the same rank's.
  bool capacity_line = false;
  for (QAbstractSeries* series : chart->chart()->series()) {
    if (auto* line = qobject_cast<QLineSeries*>(series)) {
      ASSERT_EQ(line->count(), 2);
      EXPECT_DOUBLE_EQ(line->at(0).y(), load_hardware("h100").memory_bytes / 1e9);
      EXPECT_DOUBLE_EQ(line->at(1).y(), load_hardware("h100").memory_bytes / 1e9);
      capacity_line = true;
    }
  }
  EXPECT_TRUE(capacity_line);
  EXPECT_TRUE(assumptions->text().contains("docs/math.md §3.7"));
  EXPECT_TRUE(assumptions->text().contains("world = t·c·P·D = 8·8·8·8 = 4096 GPUs"))
      << assumptions->text().toStdString();

  // Inference holds the weights and the KV cache only: less than training.
  set_choice(cost, "memory_workload", "inference");
  settle();
  settings.workload = Workload::inference;
  const RankMemory inference = peak_rank_memory(resolve_cost_inputs(spread), settings);
  const std::vector<double> inference_totals = drawn_totals(chart);
  ASSERT_EQ(inference_totals.size(), 8u);
  EXPECT_TRUE(
      test::near_relative(*std::max_element(inference_totals.begin(), inference_totals.end()),
                          inference.total(), test::roundoffs<double>(32), 0.0, "inference bar"));
  EXPECT_LT(inference.total(), peak.total());

  // Saved, the scenario carries the new inputs and reads back to the same memory.
  Scenario saved;
  cost->save_to(saved);
  EXPECT_EQ(saved.inputs.attention, AttentionKind::mla);
  EXPECT_EQ(saved.inputs.experts, 256);
  EXPECT_EQ(saved.inputs.dense_layers, 3);
  EXPECT_EQ(saved.inputs.ep, 64);
  EXPECT_EQ(saved.inputs.zero, 1);
  EXPECT_EQ(saved.inputs.recompute, RecomputePolicy::full);
  const Scenario reread = parse_scenario(scenario_to_toml(saved), "saved.toml");
  settings.workload = Workload::training;
  EXPECT_DOUBLE_EQ(peak_rank_memory(reread.inputs, settings).total(), peak.total());
  // ... and a fresh window opened on it shows the same inputs.
  MainWindow again(true);
  again.view("cost")->apply_scenario(reread);
  settle();
  View* other = again.view("cost");
  EXPECT_EQ(other->findChild<QComboBox*>("attention")->currentText(), "mla");
  EXPECT_EQ(other->findChild<QComboBox*>("recompute")->currentText(), "full");
  EXPECT_EQ(other->findChild<QSpinBox*>("ep")->value(), 64);
  EXPECT_EQ(other->findChild<QSpinBox*>("expert_ffn")->value(), 2048);
  EXPECT_NE(
      other->findChild<QLabel*>("memory_verdict")->text().toStdString().find(fit_verdict(peak)),
      std::string::npos);
}

TEST(Gui, ImpossibleParallelismShowsTheEnginesMessageAndKeepsRunning) {
  MainWindow window(true);
  View* cost = window.view("cost");
  cost->recompute();
  set_moe_61(cost);
  settle();
  ASSERT_EQ(window.error_text(), "");
  auto* verdict = cost->findChild<QLabel*>("memory_verdict");
  const QString before = verdict->text();
  auto* ep = cost->findChild<QSpinBox*>("ep");
  ASSERT_NE(ep, nullptr);
  // e = 3 does not divide the 256 experts: the engine's message, at the ep input.
  CostInputs bad = moe_61_inputs();
  bad.ep = 3;
  std::string message;
  try {
    resolve_cost_inputs(bad);
  } catch (const CostInputError& error) {
    EXPECT_EQ(error.field, "ep");
    message = error.what();
  }
  ASSERT_FALSE(message.empty());
  ep->setValue(3);
  settle();
  EXPECT_NE(window.error_text().find(message), std::string::npos) << window.error_text();
  const std::vector<QWidget*> fields = cost->error_fields();
  EXPECT_NE(std::find(fields.begin(), fields.end(), ep), fields.end());
  EXPECT_EQ(verdict->text(), before);  // the last result stays, marked stale
  EXPECT_FALSE(cost->stale_reason().isEmpty());
  // The MoE inputs without experts: the engine names the first one that needs them.
  ep->setValue(1);
  set_spin(cost, "experts", 0);
  settle();
  EXPECT_NE(window.error_text().find("applies to a mixture of experts"), std::string::npos)
      << window.error_text();
  set_spin(cost, "experts", 256);
  settle();
  EXPECT_EQ(window.error_text(), "");
  EXPECT_NE(verdict->text().toStdString().find("does not fit"), std::string::npos);
}

// The Memory tab at the smallest window and on a projector (ATTNRES_GUI_SHOTS=DIR keeps them).
TEST(Gui, MemoryTabDrawsAt1024x700AndAtProjectorSize) {
  test::TempDir temp;
  const QByteArray keep = qgetenv("ATTNRES_GUI_SHOTS");
  const fs::path dir = keep.isEmpty() ? temp.path() : fs::path(keep.toStdString());
  fs::create_directories(dir);
  MainWindow window(true);
  window.recompute_all();
  window.show_view("cost");
  View* cost = window.view("cost");
  auto* tabs = cost->findChild<QTabBar*>("cost_tabs");
  ASSERT_NE(tabs, nullptr);
  ASSERT_EQ(tabs->tabText(4), "Memory");
  tabs->setCurrentIndex(4);
  set_moe_61(cost);
  window.show();
  for (const QSize size : {QSize(1024, 700), QSize(1920, 1080)}) {
    for (const bool spread : {false, true}) {
      set_spin(cost, "tp", spread ? 8 : 1);
      set_spin(cost, "cp", spread ? 8 : 1);
      set_spin(cost, "ep", spread ? 64 : 1);
      set_spin(cost, "dp", spread ? 8 : 1);
      set_spin(cost, "zero", spread ? 1 : 0);
      set_choice(cost, "recompute", spread ? "full" : "selective");
      window.resize(size);
      settle();
      ASSERT_EQ(window.error_text(), "");
      const QImage image = window.grab().toImage();
      const std::string name = "cost-memory-" + std::to_string(size.width()) +
                               (spread ? "-fits" : "-does-not-fit") + ".png";
      ASSERT_TRUE(image.save(QString::fromStdString((dir / name).string()), "PNG"));
      auto* chart = cost->findChild<MemoryChart*>("memory_chart");
      ASSERT_NE(chart, nullptr);
      EXPECT_GE(chart->width(), 240) << name;
      EXPECT_GE(chart->height(), 180) << name;
      // The verdict is not cut: its text fits the label's width at its wrapped height.
      auto* verdict = cost->findChild<QLabel*>("memory_verdict");
      EXPECT_GE(verdict->height(), verdict->heightForWidth(verdict->width())) << name;
    }
  }
}

// ------------------------------------------------------------------ Step and Decision tabs

const fs::path kMoe61Scenario = fs::path(ATTNRES_SCENARIOS_DIR) / "moe-61-layers-128k.toml";

// The step the scenario's [pipeline] table describes, with the explorer's strategy picker.
PipelineSettings scenario_step_settings(const Scenario& scenario, View* cost) {
  PipelineSettings settings = *scenario.pipeline;
  settings.strategy = parse_strategy(
      cost->findChild<QComboBox*>("strategy")->currentText().toStdString(), "strategy");
  settings.record_timeline = false;
  return settings;
}

// Every displayed cell of a table widget against the report table's rows.
void expect_same_cells(QTableWidget* widget, const ReportTable& table) {
  ASSERT_EQ(widget->rowCount(), static_cast<int>(table.rows.size())) << table.id;
  ASSERT_EQ(widget->columnCount(), static_cast<int>(table.header.size())) << table.id;
  for (int c = 0; c < widget->columnCount(); ++c)
    EXPECT_EQ(widget->horizontalHeaderItem(c)->text().toStdString(),
              table.header[static_cast<std::size_t>(c)]);
  for (int r = 0; r < widget->rowCount(); ++r)
    for (int c = 0; c < widget->columnCount(); ++c)
      EXPECT_EQ(widget->item(r, c)->text().toStdString(),
                table.rows[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)])
          << table.id << " row " << r << " column " << c;
}

void type_text(View* view, const char* name, const QString& text) {
  auto* edit = view->findChild<QLineEdit*>(name);
  ASSERT_NE(edit, nullptr) << name;
  edit->setText(text);
  emit edit->editingFinished();
  settle();
}

// With ATTNRES_GUI_SHOTS=DIR, the window at 1024x700 as DIR/name (to look at); else nothing.
void keep_shot(MainWindow& window, const std::string& name) {
  const QByteArray keep = qgetenv("ATTNRES_GUI_SHOTS");
  if (keep.isEmpty()) return;
  window.show();
  window.resize(1024, 700);
  settle();
  window.grab().toImage().save(
      QString::fromStdString((fs::path(keep.toStdString()) / name).string()), "PNG");
}

void show_cost_tab(View* cost, const QString& title) {
  auto* tabs = cost->findChild<QTabBar*>("cost_tabs");
  ASSERT_NE(tabs, nullptr);
  for (int i = 0; i < tabs->count(); ++i) {
    if (tabs->tabText(i) == title) {
      tabs->setCurrentIndex(i);
      settle();
      return;
    }
  }
  FAIL() << "no tab " << title.toStdString();
}

TEST(Gui, StepTabShowsTheEnginesStepOverheadForThe61LayerMoe) {
  MainWindow window(true);
  ASSERT_TRUE(window.open_scenario(kMoe61Scenario));
  settle();
  ASSERT_EQ(window.error_text(), "");
  View* cost = window.view("cost");
  show_cost_tab(cost, "Step");
  auto* headline = cost->findChild<QLabel*>("step_headline");
  auto* parts = cost->findChild<QTableWidget*>("step_parts");
  auto* reconciliation = cost->findChild<QTableWidget*>("step_reconciliation");
  auto* stages = cost->findChild<QTableWidget*>("stage_layout");
  auto* warning = cost->findChild<QLabel*>("stage_warning");
  ASSERT_NE(headline, nullptr);
  ASSERT_NE(parts, nullptr);
  ASSERT_NE(reconciliation, nullptr);
  ASSERT_NE(stages, nullptr);
  ASSERT_NE(warning, nullptr);
  // The engine on the same settings: the scenario's step with the explorer's strategy.
  const Scenario scenario = load_scenario(kMoe61Scenario);
  ASSERT_TRUE(scenario.pipeline);
  PipelineSettings settings = scenario_step_settings(scenario, cost);
  EXPECT_EQ(settings.strategy, scenario.strategy);
  EXPECT_EQ(settings.microbatches, 16);
  const PipelineReport report = evaluate_pipeline(settings);
  const std::string overhead =
      shown_value(nlohmann::json(report.attnres_overhead_fraction), Shown::percent);
  ASSERT_GT(report.attnres_overhead_fraction, 0);
  EXPECT_TRUE(headline->text().startsWith(
      QString::fromStdString("AttnRes adds " + overhead + " % to the step (mechanism ")))
      << headline->text().toStdString();
  EXPECT_EQ(headline->text().toStdString(), step_headline(report));
  // The tables cell for cell as `attnres pipeline` prints them; the reconciliation's step row is
  // the headline's number.
  expect_same_cells(parts, step_table(report));
  expect_same_cells(reconciliation, reconciliation_table(report));
  bool step_row = false;
  for (int r = 0; r < reconciliation->rowCount(); ++r) {
    if (reconciliation->item(r, 0)->text() != "step") continue;
    EXPECT_EQ(reconciliation->item(r, 1)->text().toStdString(), overhead);
    step_row = true;
  }
  EXPECT_TRUE(step_row);
  // The stage layout: P·V = 16 chunks, chunk c on rank c mod 8, the 61 layers whole.
  ASSERT_EQ(stages->columnCount(), 16);
  double layers = 0;
  for (int c = 0; c < stages->columnCount(); ++c) {
    EXPECT_EQ(stages->item(0, c)->text().toInt(), c % 8) << c;
    layers += stages->item(1, c)->text().toDouble();
  }
  EXPECT_DOUBLE_EQ(layers, 61);
  EXPECT_TRUE(warning->isHidden());
  // The overlap of a group and the strategy picker change the step as they change the engine's.
  auto* cp = cost->findChild<QCheckBox*>("overlap_cp");
  ASSERT_NE(cp, nullptr);
  EXPECT_TRUE(cp->isChecked());  // CommOverlap{}
  cp->setChecked(false);
  settle();
  settings.comm_overlap.cp = false;
  const PipelineReport exposed = evaluate_pipeline(settings);
  EXPECT_EQ(headline->text().toStdString(), step_headline(exposed));
  expect_same_cells(parts, step_table(exposed));
  set_choice(cost, "strategy", "stack");
  settle();
  settings.strategy = Strategy::stack;
  const PipelineReport stack = evaluate_pipeline(settings);
  EXPECT_EQ(headline->text().toStdString(), step_headline(stack));
  expect_same_cells(reconciliation, reconciliation_table(stack));
  // The micro-batches of the Memory tab are the step's.
  set_spin(cost, "microbatches", 32);
  settle();
  settings.microbatches = 32;
  EXPECT_EQ(headline->text().toStdString(), step_headline(evaluate_pipeline(settings)));
  EXPECT_EQ(window.error_text(), "");
}

// The 61-layer MoE scenario open in `window` (a synchronous one), its cost explorer on `tab`.
View* moe_61_cost_tab(MainWindow& window, const char* tab) {
  EXPECT_TRUE(window.open_scenario(kMoe61Scenario));
  settle();
  View* cost = window.view("cost");
  show_cost_tab(cost, tab);
  return cost;
}

TEST(Gui, DecisionTabRecommendsTheSameNAsMakePlanForA2PercentBudget) {
  MainWindow window(true);
  View* cost = moe_61_cost_tab(window, "Decision");
  auto* panel = cost->findChild<DecisionPanel*>("decision_tab");
  auto* summary = cost->findChild<QLabel*>("plan_summary");
  auto* by_blocks = cost->findChild<QPlainTextEdit*>("plan_by_blocks");
  auto* table = cost->findChild<QTableWidget*>("plan_table");
  ASSERT_NE(panel, nullptr);
  ASSERT_NE(summary, nullptr);
  ASSERT_NE(by_blocks, nullptr);
  ASSERT_NE(table, nullptr);
  type_text(cost, "plan_max_overhead", "2");
  ASSERT_EQ(window.error_text(), "");
  EXPECT_TRUE(cost->findChild<QLabel*>("plan_problem")->isHidden());
  // The engine on the same settings: the scenario's [plan] grid (the default N of L = 122, its t
  // and c values) and a 2 % budget.
  const Scenario scenario = load_scenario(kMoe61Scenario);
  ASSERT_TRUE(scenario.plan);
  const PipelineSettings base = scenario_step_settings(scenario, cost);
  const PlanGrid grid = scenario.plan->grid;
  EXPECT_EQ(grid.blocks, (std::vector<std::int64_t>{1, 2, 4, 8, 16, 31, 61, 122}));
  EXPECT_EQ(cost->findChild<QLineEdit*>("plan_blocks")->text(), "");  // the default N
  EXPECT_EQ(cost->findChild<QLineEdit*>("plan_tp")->text(), "4,8");
  PlanBudgets budgets;
  budgets.max_overhead_fraction = 0.02;
  const PlanResult plan = make_plan(base, grid, budgets);
  ASSERT_TRUE(plan.recommended) << plan.summary;
  const PlanCandidate& best = plan.candidates[*plan.recommended];
  ASSERT_TRUE(panel->result().recommended);
  EXPECT_EQ(panel->result().candidates[*panel->result().recommended].blocks, best.blocks);
  EXPECT_EQ(summary->text().toStdString(), plan.summary);
  for (const auto& line : plan.by_blocks)
    EXPECT_TRUE(by_blocks->toPlainText().contains(QString::fromStdString(line))) << line;
  // The table is the plan table; the recommended row is bold and shows its N.
  const ReportTable expected = plan_table(plan);
  expect_same_cells(table, expected);
  const int row = panel->recommended_row();
  ASSERT_EQ(row, static_cast<int>(*plan.recommended));
  EXPECT_EQ(table->item(row, 0)->text().toStdString(), std::to_string(best.blocks));
  EXPECT_TRUE(table->item(row, 0)->font().bold());
  // The columns the same in every row are named above it instead, the overhead stays in view.
  EXPECT_FALSE(table->isColumnHidden(0));  // N
  EXPECT_FALSE(table->isColumnHidden(1));  // t = 4, 8
  EXPECT_TRUE(table->isColumnHidden(3));   // e = 64 throughout
  EXPECT_FALSE(table->isColumnHidden(9));  // the overhead
  EXPECT_TRUE(cost->findChild<QLabel*>("plan_constant")->text().contains("e = 64"));
  // Another budget, typed: the engine's plan for it.
  type_text(cost, "plan_max_overhead", "0.5");
  budgets.max_overhead_fraction = 0.005;
  const PlanResult tight = make_plan(base, grid, budgets);
  EXPECT_EQ(summary->text().toStdString(), tight.summary);
  EXPECT_EQ(panel->recommended_row(),
            tight.recommended ? static_cast<int>(*tight.recommended) : -1);
  // Only the N typed, t as set (8).
  type_text(cost, "plan_tp", "");
  type_text(cost, "plan_cp", "");
  type_text(cost, "plan_blocks", "4,8");
  PlanGrid typed;
  typed.blocks = {4, 8};
  const PlanResult few = make_plan(base, typed, budgets);
  expect_same_cells(table, plan_table(few));
  EXPECT_EQ(window.error_text(), "");
}

TEST(Gui, DecisionTabSaysWhatIsWrongWithABadBudgetAndKeepsRunning) {
  MainWindow window(true);
  View* cost = moe_61_cost_tab(window, "Decision");
  auto* panel = cost->findChild<DecisionPanel*>("decision_tab");
  auto* problem = cost->findChild<QLabel*>("plan_problem");
  auto* budget = cost->findChild<QLineEdit*>("plan_max_overhead");
  ASSERT_NE(problem, nullptr);
  type_text(cost, "plan_max_overhead", "2");
  ASSERT_TRUE(problem->isHidden());
  const std::string summary = panel->result().summary;
  // A negative budget: the engine's rule, at the input, the last plan kept.
  PlanBudgets negative;
  negative.max_overhead_fraction = -0.01;
  const std::string rule = plan_budgets_problem(negative);
  ASSERT_FALSE(rule.empty());
  type_text(cost, "plan_max_overhead", "-1");
  EXPECT_FALSE(problem->isHidden());
  EXPECT_NE(problem->text().toStdString().find("max AttnRes overhead (%): " + rule),
            std::string::npos)
      << problem->text().toStdString();
  EXPECT_EQ(budget->palette().color(QPalette::Base), QColor(253, 214, 211));
  EXPECT_EQ(panel->result().summary, summary);
  // Not a number; a negative traffic budget; a bad N list.
  type_text(cost, "plan_max_overhead", "two");
  EXPECT_TRUE(problem->text().contains("\"two\" is not a number")) << problem->text().toStdString();
  type_text(cost, "plan_max_overhead", "");
  type_text(cost, "plan_max_pipeline_gb", "-5");
  EXPECT_TRUE(problem->text().contains("the pipeline traffic budget must be > 0"))
      << problem->text().toStdString();
  type_text(cost, "plan_max_pipeline_gb", "");
  type_text(cost, "plan_blocks", "1,x");
  EXPECT_TRUE(problem->text().contains("block counts N")) << problem->text().toStdString();
  type_text(cost, "plan_blocks", "4,500");
  EXPECT_TRUE(problem->text().contains("N = 500 exceeds L = 122")) << problem->text().toStdString();
  EXPECT_FALSE(cost->findChild<QTableWidget*>("plan_table")->isEnabled());  // greyed: not current
  // The CLI's range forms (attnres plan --try-blocks): a range past L is refused, not clamped.
  type_text(cost, "plan_blocks", "1:500:x2");
  EXPECT_TRUE(problem->text().contains("N = 128 exceeds L = 122")) << problem->text().toStdString();
  type_text(cost, "plan_blocks", "0:4");
  EXPECT_TRUE(problem->text().contains("values must be >= 1")) << problem->text().toStdString();
  type_text(cost, "plan_blocks", "4:8:4");
  EXPECT_TRUE(problem->isHidden()) << problem->text().toStdString();
  // Fixed: the plan runs again, the message goes, the window never stopped.
  type_text(cost, "plan_blocks", "");
  type_text(cost, "plan_max_overhead", "2");
  EXPECT_TRUE(problem->isHidden());
  EXPECT_EQ(budget->palette().color(QPalette::Base), QPalette().color(QPalette::Base));
  EXPECT_EQ(panel->result().summary, summary);
  EXPECT_EQ(window.error_text(), "");
}

// Off the GUI thread, the plan's Cancel stops it inside the grid (make_plan checks the run's
// progress after every setting) and its result is never applied.
TEST(Gui, DecisionTabPlansOffTheGuiThreadAndCancelStopsIt) {
  MainWindow window(false);
  ASSERT_TRUE(window.open_scenario(kMoe61Scenario));
  View* cost = window.view("cost");
  show_cost_tab(cost, "Decision");
  // Many micro-batches make every simulation of the plan longer (m x P·V = 16,000 pairs).
  set_spin(cost, "microbatches", 1000);
  ASSERT_TRUE(wait_until([&] { return window.runs_in_flight() == 0; }, 120000));
  settle();
  auto* panel = cost->findChild<DecisionPanel*>("decision_tab");
  ASSERT_NE(panel, nullptr);
  ASSERT_EQ(panel->result().candidates.size(), 32u);  // 8 N x t 4, 8 x c 4, 8
  const std::string summary = panel->result().summary;
  // The same plan with a 1 % budget, timed here in one go.
  const Scenario scenario = load_scenario(kMoe61Scenario);
  PipelineSettings base = scenario_step_settings(scenario, cost);
  base.microbatches = 1000;
  PlanBudgets budgets = scenario.plan->budgets;
  budgets.max_overhead_fraction = 0.01;
  const PlanResult plan = make_plan(base, scenario.plan->grid, budgets);
  ASSERT_NE(plan.summary, summary);
  // Typed, then cancelled at once: the worker stops long before the plan would end, and its
  // result is never applied.
  type_text(cost, "plan_max_overhead", "1");
  ASSERT_GT(window.runs_in_flight(), 0u);
  QElapsedTimer timer;
  timer.start();
  window.cancel_background();
  ASSERT_TRUE(wait_until([&] { return window.runs_in_flight() == 0; }));
  settle();
  // The worker stops at its next setting (the plan checks after each), not at the end.
  EXPECT_LT(timer.elapsed(), 10000);
  EXPECT_EQ(panel->result().summary, summary);
  EXPECT_EQ(window.error_text(), "");
  // Typed again, it completes: the engine's plan.
  type_text(cost, "plan_max_overhead", "1");
  ASSERT_TRUE(wait_until([&] { return window.runs_in_flight() == 0; }, 120000));
  settle();
  EXPECT_EQ(panel->result().summary, plan.summary);
}

TEST(Gui, StageLayersListThatDoesNotSumShowsTheEnginesMessageAndKeepsRunning) {
  MainWindow window(true);
  View* cost = moe_61_cost_tab(window, "Step");
  auto* edit = cost->findChild<QLineEdit*>("stage_layers");
  ASSERT_NE(edit, nullptr);
  const CostInputList& list = *find_cost_input_list("stage_layers");
  EXPECT_TRUE(edit->toolTip().startsWith(QString::fromUtf8(list.help.data(), 1).toUpper()));
  EXPECT_TRUE(edit->toolTip().contains("docs/math.md §3.3"));
  auto* headline = cost->findChild<QLabel*>("step_headline");
  const QString before = headline->text();
  // 16 chunks of 4 layers: 64, not the 61 layers. The engine's message, at the line edit.
  const Scenario scenario = load_scenario(kMoe61Scenario);
  CostInputs bad = scenario.inputs;
  bad.stage_layers.assign(16, 4);
  const auto problem = try_resolve_cost_inputs(bad);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->field, "stage_layers");
  type_text(cost, "stage_layers", "4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4");
  EXPECT_NE(window.error_text().find(problem->message), std::string::npos) << window.error_text();
  const auto fields = cost->error_fields();
  EXPECT_NE(std::find(fields.begin(), fields.end(), edit), fields.end());
  EXPECT_EQ(headline->text(), before);  // the last step stays
  keep_shot(window, "cost-step-bad-stage-list.png");
  // A list that does not parse: the parser's message names the input.
  type_text(cost, "stage_layers", "4,x");
  EXPECT_NE(window.error_text().find("stage layers"), std::string::npos) << window.error_text();
  // 15 chunks of 4 and one of 1: the step of that layout, as the engine simulates it.
  type_text(cost, "stage_layers", "4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,1");
  ASSERT_EQ(window.error_text(), "");
  PipelineSettings settings = scenario_step_settings(scenario, cost);
  settings.model.stage_layers.assign(16, 4);
  settings.model.stage_layers.back() = 1;
  settings.model = resolve_cost_inputs(settings.model);
  EXPECT_EQ(headline->text().toStdString(), step_headline(evaluate_pipeline(settings)));
  auto* stages = cost->findChild<QTableWidget*>("stage_layout");
  ASSERT_EQ(stages->columnCount(), 16);
  EXPECT_EQ(stages->item(1, 0)->text(), "4");
  EXPECT_EQ(stages->item(1, 15)->text(), "1");
  EXPECT_EQ(stages->item(2, 15)->text(), "61");
  // Saved, the scenario carries the list.
  Scenario saved;
  cost->save_to(saved);
  EXPECT_EQ(saved.inputs.stage_layers, settings.model.stage_layers);
  // Cleared: whole layers split evenly again.
  type_text(cost, "stage_layers", "");
  EXPECT_EQ(window.error_text(), "");
  EXPECT_EQ(headline->text(), before);
}

TEST(Gui, StepTabWarnsWhenStageBoundariesSplitALayer) {
  MainWindow window(true);
  View* cost = window.view("cost");
  cost->recompute();
  show_cost_tab(cost, "Step");
  auto* warning = cost->findChild<QLabel*>("stage_warning");
  auto* stages = cost->findChild<QTableWidget*>("stage_layout");
  ASSERT_NE(warning, nullptr);
  ASSERT_NE(stages, nullptr);
  EXPECT_TRUE(warning->isHidden());  // 64 layers on P·V = 8 chunks
  // 6 layers on P·V = 8 chunks: the boundaries cut layers.
  set_spin(cost, "sublayers", 12);
  set_spin(cost, "blocks", 4);
  settle();
  ASSERT_EQ(window.error_text(), "");
  Scenario saved;
  cost->save_to(saved);
  const std::string expected = stage_split_warning(saved.inputs);
  ASSERT_FALSE(expected.empty());
  EXPECT_FALSE(warning->isHidden());
  EXPECT_EQ(warning->text().toStdString(), "Warning: " + expected);
  auto* step = cost->findChild<StepPanel*>("step_tab");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->result().report.stage_warning, expected);
  keep_shot(window, "cost-step-split-layers.png");
  ASSERT_EQ(stages->columnCount(), 8);
  int split = 0;
  for (int c = 0; c < stages->columnCount(); ++c)
    if (stages->item(1, c)->background().color() == QColor(255, 236, 190)) ++split;
  EXPECT_GT(split, 0);
  // Whole layers again: the warning goes.
  set_spin(cost, "sublayers", 32);
  settle();
  EXPECT_TRUE(warning->isHidden());
}

// The Step and Decision tabs at the smallest window and on a projector (presentation mode's
// larger type); ATTNRES_GUI_SHOTS=DIR keeps the images.
TEST(Gui, StepAndDecisionTabsDrawAt1024x700AndAtProjectorSize) {
  test::TempDir temp;
  const QByteArray keep = qgetenv("ATTNRES_GUI_SHOTS");
  const fs::path dir = keep.isEmpty() ? temp.path() : fs::path(keep.toStdString());
  fs::create_directories(dir);
  MainWindow window(true);
  ASSERT_TRUE(window.open_scenario(kMoe61Scenario));
  window.show_view("cost");
  View* cost = window.view("cost");
  window.show();
  for (const bool projector : {false, true}) {
    window.set_presentation(projector);
    window.resize(projector ? QSize(1920, 1080) : QSize(1024, 700));
    for (const QString tab : {"Step", "Decision"}) {
      show_cost_tab(cost, tab);
      if (tab == "Decision") type_text(cost, "plan_max_overhead", "2");
      settle();
      ASSERT_EQ(window.error_text(), "");
      const std::string name = "cost-" + tab.toLower().toStdString() + "-" +
                               (projector ? "1920-projector" : "1024") + ".png";
      const QImage image = window.grab().toImage();
      ASSERT_TRUE(image.save(QString::fromStdString((dir / name).string()), "PNG"));
      // No label cut: each shows its text at its wrapped height.
      for (const char* label : {"step_headline", "step_setting", "stage_warning", "plan_summary"}) {
        auto* l = cost->findChild<QLabel*>(label);
        ASSERT_NE(l, nullptr) << label;
        if (!l->isVisible()) continue;
        EXPECT_GE(l->height(), l->heightForWidth(l->width())) << name << " " << label;
      }
      if (tab == "Step") {
        // The parts table shows all of its rows; the stage layout its three.
        auto* parts = cost->findChild<QTableWidget*>("step_parts");
        auto* stages = cost->findChild<QTableWidget*>("stage_layout");
        auto* reconciliation = cost->findChild<QTableWidget*>("step_reconciliation");
        for (QTableWidget* t : {parts, reconciliation, stages}) {
          EXPECT_GE(t->viewport()->height(), t->rowCount() * t->rowHeight(0)) << name;
          // The type of presentation mode reaches the rows.
          EXPECT_GE(t->rowHeight(0), t->fontMetrics().height()) << name;
        }
        EXPECT_FALSE(parts->horizontalScrollBar()->isVisible()) << name;
        // The page scrolls (not sideways) to the stage layout.
        auto* scroll = cost->findChild<QScrollArea*>("step_scroll");
        ASSERT_NE(scroll, nullptr);
        EXPECT_FALSE(scroll->horizontalScrollBar()->isVisible()) << name;
        scroll->verticalScrollBar()->setValue(scroll->verticalScrollBar()->maximum());
        settle();
        const std::string bottom =
            "cost-step-" + std::string(projector ? "1920-projector" : "1024") + "-scrolled.png";
        ASSERT_TRUE(
            window.grab().toImage().save(QString::fromStdString((dir / bottom).string()), "PNG"));
        const QRect shown = stages->rect().translated(stages->mapTo(scroll->viewport(), QPoint()));
        EXPECT_TRUE(scroll->viewport()->rect().contains(shown)) << name;
        // The styled headline takes presentation mode's type too.
        auto* headline = cost->findChild<QLabel*>("step_headline");
        EXPECT_NEAR(headline->fontInfo().pointSizeF(), QFontInfo(QApplication::font()).pointSizeF(),
                    0.5)
            << name;
      } else {
        auto* table = cost->findChild<QTableWidget*>("plan_table");
        EXPECT_GE(table->viewport()->height(), 3 * table->rowHeight(0)) << name;
      }
    }
  }
  window.set_presentation(false);
}

TEST(Gui, HeatmapCellCentreHasTheColormapColourOfItsValue) {
  HeatmapWidget map;
  map.resize(420, 320);
  map.set_data("t", {{0.0, 0.25, 0.5}, {0.75, 1.0, NAN}}, {"r0", "r1"}, {"c0", "c1", "c2"}, 0.0,
               1.0);
  const QImage image = map.grab().toImage();
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) {
      const QPointF centre = map.cell_center(r, c);
      const QColor pixel = image.pixelColor(centre.toPoint());
      const double v = map.values()[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)];
      const Rgb expected = viridis(v);
      EXPECT_EQ(pixel.red(), expected.r) << r << "," << c;
      EXPECT_EQ(pixel.green(), expected.g) << r << "," << c;
      EXPECT_EQ(pixel.blue(), expected.b) << r << "," << c;
      EXPECT_EQ(map.cell_at(centre), std::make_pair(r, c));
    }
  }
  EXPECT_EQ(viridis(0.0), (Rgb{68, 1, 84}));
  EXPECT_EQ(viridis(1.0), (Rgb{253, 231, 37}));
  EXPECT_EQ(map.csv(), "row,c0,c1,c2\nr0,0,0.25,0.5\nr1,0.75,1,\n");
}

TEST(Gui, BadScenarioShowsTheCliMessageAndTheWindowKeepsWorking) {
  test::TempDir dir;
  write_file_atomically(dir / "bad.toml", "[model]\nsublayers = 8\nd_model = 16\nblocks = 12\n");
  MainWindow window(true);
  window.recompute_all();
  EXPECT_FALSE(window.open_scenario(dir / "bad.toml"));
  EXPECT_NE(window.error_text().find("bad.toml:4:10: blocks N = 12 exceeds L = 8 sublayers"),
            std::string::npos)
      << window.error_text();
  EXPECT_TRUE(window.open_scenario(fs::path(ATTNRES_SCENARIOS_DIR) / "paper-table1.toml"));
  EXPECT_EQ(window.error_text(), "");
  EXPECT_EQ(window.view("cost")->findChild<QSpinBox*>("sublayers")->value(), 128);
  EXPECT_FALSE(window.open_model(dir / "no-model"));
  EXPECT_NE(window.error_text().find("no-model"), std::string::npos);
}

TEST(Gui, GuiAndCliDrawTheSameChartFromTheSameScenario) {
  const fs::path path = fs::path(ATTNRES_SCENARIOS_DIR) / "block-size-tradeoff.toml";
  MainWindow window(true);
  ASSERT_TRUE(window.open_scenario(path));
  View* cost = window.view("cost");
  auto* sweep = cost->findChild<QComboBox*>("scenario_sweep");
  ASSERT_NE(sweep, nullptr);
  ASSERT_EQ(sweep->count(), 5);  // "(none)" + four sweeps
  sweep->setCurrentIndex(1);
  settle();
  const ChartSpec gui = cost->charts().front();
  const Report report = build_report(load_scenario(path));
  const ChartSpec* cli = nullptr;
  for (const auto& chart : report.charts) {
    if (chart.id == "tradeoff_io") cli = &chart;
  }
  ASSERT_NE(cli, nullptr);
  EXPECT_EQ(gui.title, cli->title);
  ASSERT_EQ(gui.series.size(), cli->series.size());
  for (std::size_t i = 0; i < gui.series.size(); ++i) {
    EXPECT_EQ(gui.series[i].name, cli->series[i].name);
    EXPECT_EQ(gui.series[i].points, cli->series[i].points);
  }
}

TEST(Gui, ExportsChartsHeatmapsAndData) {
  test::TempDir dir;
  std::unique_ptr<MainWindow> owner;
  {
    const ModelsDirectory no_models{
        fs::path()};  // the random model, whatever resources/models holds
    owner = std::make_unique<MainWindow>(true);
  }
  MainWindow& window = *owner;
  window.recompute_all();
  window.show_view("depth-attention");
  ASSERT_EQ(window.export_titles().size(), 1u);  // one scheme: one heatmap
  auto* compare = window.view("depth-attention")->findChild<QComboBox*>("compare");
  ASSERT_NE(compare, nullptr);
  compare->setCurrentIndex(compare->findData("block"));
  settle();
  const auto titles = window.export_titles();
  ASSERT_EQ(titles.size(), 2u);  // the two heatmaps of compare mode
  EXPECT_TRUE(window.export_chart(0, dir / "full.png"));
  EXPECT_TRUE(window.export_chart(1, dir / "block.svg"));
  EXPECT_TRUE(window.export_data(0, dir / "full.csv"));
  EXPECT_FALSE(QImage(QString::fromStdString((dir / "full.png").string())).isNull());
  EXPECT_NE(read_file(dir / "block.svg").find("<svg"), std::string::npos);
  EXPECT_EQ(read_file(dir / "full.csv").rfind("row,emb,v1", 0), 0u);
  window.show_view("scaling");
  EXPECT_TRUE(window.export_chart(0, dir / "loss.svg"));
  EXPECT_TRUE(window.export_data(1, dir / "multiplier.csv"));
  EXPECT_EQ(read_file(dir / "multiplier.csv").rfind("series,x,y\n\"Block AttnRes\"", 0), 0u);
  EXPECT_FALSE(window.export_chart(0, dir / "loss.jpg"));
  EXPECT_NE(window.error_text().find("must end in .png or .svg"), std::string::npos);
}

TEST(Gui, DepthAttentionFollowsTheTokenChoiceAndALoadedModel) {
  test::TempDir dir;
  ModelConfig config = test::model_config(2, 16, 2, 2, 24, 300);
  save_model(random_model(config, {.seed = 5, .query_std = 1.0}), dir / "m");
  MainWindow window(true);
  ASSERT_TRUE(window.open_model(dir / "m"));
  View* depth = window.view("depth-attention");
  auto* token = depth->findChild<QComboBox*>("token");
  ASSERT_EQ(token->count(), 7);  // mean + six tokens
  // The model's own scheme is the standard residual: every read weighs each earlier output by 1.
  auto* scheme = depth->findChild<QComboBox*>("scheme");
  ASSERT_NE(scheme, nullptr);
  EXPECT_EQ(scheme->currentText(), "model's own: standard residual");
  const auto maps = depth->heatmaps();
  ASSERT_EQ(maps[0]->values().size(), 5u);
  for (std::size_t r = 0; r < 5; ++r) {
    for (std::size_t c = 0; c < 5; ++c) {
      const double v = maps[0]->values()[r][c];
      if (c <= r) {
        EXPECT_EQ(v, 1.0) << r << "," << c;
      } else {
        EXPECT_TRUE(std::isnan(v)) << r << "," << c;
      }
    }
  }
  // Full AttnRes on its weights (the file's random queries): softmax rows.
  scheme->setCurrentIndex(scheme->findData("full"));
  settle();
  EXPECT_EQ(maps[0]->values().size(), 5u);  // L + 1 = 5 reads for 2 layers
  // Each token's softmax over n <= 5 sources sums to 1 within ~2n u, the mean over the text's
  // tokens adds about 1 u per token, the row's sum n more: 64 u.
  for (const auto& row : maps[0]->values()) {
    double sum = 0;
    for (double v : row) sum += std::isnan(v) ? 0 : v;
    EXPECT_TRUE(test::near_relative(sum, 1.0, test::roundoffs<double>(64), 0.0, "row sum"));
  }
  const auto mean = maps[0]->values();
  token->setCurrentIndex(3);
  EXPECT_NE(maps[0]->values(), mean);
}

// One home for the opened model: a directory is read once per open (the lesson model parses its
// config.json and reads its model.safetensors), and every model view reads the weights from there.
TEST(Gui, AnOpenedModelDirectoryIsReadOnce) {
  test::TempDir dir;
  save_model(random_model(test::model_config(2, 16, 2, 2, 24, 256), {.seed = 5, .query_std = 1.0}),
             dir / "m");
  std::unique_ptr<MainWindow> owner;
  {
    const ModelsDirectory no_models{fs::path()};  // start on the random model
    owner = std::make_unique<MainWindow>(true);
  }
  MainWindow& window = *owner;
  window.recompute_all();
  LessonModel& lesson = window.lesson();
  EXPECT_EQ(lesson.directory_reads(), 0);
  EXPECT_EQ(lesson.opened(), nullptr);
  ASSERT_TRUE(window.open_model(dir / "m"));
  EXPECT_EQ(lesson.directory_reads(), 1);
  ASSERT_NE(lesson.opened(), nullptr);
  EXPECT_EQ(lesson.snapshot().build(), lesson.opened()->weights);
  EXPECT_EQ(window.findChild<QComboBox*>("model_choice")->itemData(0), QVariant());
  // The files may go: every model view recomputes from the opened model, with two schemes each.
  fs::remove_all(dir / "m");
  window.recompute_all();
  for (const char* name : {"depth-attention", "magnitudes", "duality"}) {
    window.show_view(name);
    auto* compare = window.view(name)->findChild<QComboBox*>("compare");
    ASSERT_NE(compare, nullptr) << name;
    compare->setCurrentIndex(compare->findData("block"));
    settle();
    EXPECT_EQ(window.view(name)->error_text(), "") << name;
  }
  EXPECT_EQ(window.error_text(), "");
  EXPECT_EQ(lesson.directory_reads(), 1);
  // A directory that does not load is read once and changes nothing.
  EXPECT_FALSE(window.open_model(dir / "m"));
  EXPECT_EQ(lesson.directory_reads(), 2);
  EXPECT_EQ(window.findChild<QComboBox*>("model_choice")->currentText().toStdString(),
            "loaded: " + (dir / "m").string());
  EXPECT_EQ(lesson.snapshot().build(), lesson.opened()->weights);
  // The random model holds no directory.
  lesson.back_to_random();
  EXPECT_EQ(lesson.opened(), nullptr);
  EXPECT_EQ(lesson.directory_reads(), 2);
}

// ------------------------------------------------------------------ the shipped trained models

// A training log as the trainer writes it: step 0 (validation 5.5452), 30 (no validation) and 60
// (validation 2.5172).
std::string three_row_train_log(int sublayers) {
  const auto row = [sublayers](std::int64_t step, double train, double val, double lr) {
    TrainLogRow r;
    r.step = step;
    r.tokens = 128 * step;
    r.train_loss = train;
    r.val_loss = val;
    r.lr = lr;
    if (step > 0) {
      r.grad_norm = 0.9;
      r.output_rms.assign(static_cast<std::size_t>(sublayers), 1.0);
      r.output_grad_rms.assign(static_cast<std::size_t>(sublayers), 0.1);
    }
    return r;
  };
  return train_log_csv(
      {row(0, NAN, 5.5452, 0), row(30, 3.1, NAN, 0.001), row(60, 2.4, 2.5172, 0.0001)}, sublayers);
}

// Small stand-ins for resources/models/ (2 layers, L = 4, d = 16, bytes), with a training log.
void write_shipped_models(const fs::path& root) {
  ModelConfig config = test::model_config(2, 16, 2, 2, 24, 256);
  const std::pair<const char*, AttnResConfig> models[] = {
      {"full", {ResidualMode::full, 0, 1e-6}},
      {"block_N4", {ResidualMode::block, 2, 1e-6}},
      {"block_N2", {ResidualMode::block, 4, 1e-6}},
      {"standard", {ResidualMode::standard, 0, 1e-6}}};
  std::uint64_t seed = 11;
  for (const auto& [name, attn_res] : models) {
    config.attn_res = attn_res;
    save_model(random_model(config, {.seed = seed++, .query_std = 1.0}), root / name);
    write_file_atomically(root / name / "train_log.csv", three_row_train_log(config.sublayers()));
  }
}

std::string byte_ids(const std::string& text) {
  std::string ids;
  for (unsigned char c : text) {
    if (!ids.empty()) ids += ' ';
    ids += std::to_string(int(c));
  }
  return ids;
}

// Chooses an entry of the lesson model (one model for every model view).
void choose(View* view, const QString& entry) {
  auto* combo = view->window()->findChild<QComboBox*>("model_choice");
  ASSERT_NE(combo, nullptr) << view->name();
  const int index = combo->findText(entry);
  ASSERT_GE(index, 0) << entry.toStdString();
  combo->setCurrentIndex(index);
}

TEST(Gui, ModelViewsOpenOnTheShippedTrainedFullModel) {
  test::TempDir dir;
  write_shipped_models(dir / "models");
  std::unique_ptr<MainWindow> window;
  {
    const ModelsDirectory models(dir / "models");
    EXPECT_EQ(shipped_models_directory(), dir / "models");
    ASSERT_EQ(available_shipped_models().size(), 4u);
    window = std::make_unique<MainWindow>(true);
  }
  window->recompute_all();
  EXPECT_EQ(window->error_text(), "");
  EXPECT_EQ(window->lesson().directory_reads(), 1);  // the trained Full model, once for all views
  View* depth = window->view("depth-attention");
  auto* combo = depth->findChild<QComboBox*>("model_choice");
  ASSERT_NE(combo, nullptr);
  ASSERT_EQ(combo->count(), 5);
  EXPECT_EQ(combo->itemText(0), "trained: Full AttnRes");
  EXPECT_EQ(combo->itemText(1), "trained: Block AttnRes N = 4 (S = 2)");
  EXPECT_EQ(combo->itemText(2), "trained: Block AttnRes N = 2 (S = 4)");
  EXPECT_EQ(combo->itemText(3), "trained: standard residual");
  EXPECT_EQ(combo->itemText(4), "random model (the settings below)");
  EXPECT_EQ(combo->currentText(), "trained: Full AttnRes");
  const std::string about = depth->findChild<QLabel*>("model_about")->text().toStdString();
  EXPECT_NE(about.find("trained 60 steps on lab-corpus.txt, validation loss 5.55"),
            std::string::npos)
      << about;
  EXPECT_NE(about.find("2.52 nats/token"), std::string::npos) << about;
  // The trained model's shape, not editable; its tokens are the bytes of a sentence.
  auto* layers = depth->findChild<QSpinBox*>("layers");
  EXPECT_EQ(layers->value(), 2);
  EXPECT_FALSE(layers->isEnabled());
  EXPECT_EQ(depth->findChild<QSpinBox*>("d_model")->value(), 16);
  auto* tokens = depth->findChild<QLineEdit*>("tokens");
  EXPECT_EQ(tokens->text().toStdString(), byte_ids("Attention residuals read the depth history."));
  auto* token = depth->findChild<QComboBox*>("token");
  ASSERT_EQ(token->count(), 1 + 43);
  EXPECT_EQ(token->itemText(1), "token 0 ('A', id 65)");
  // The scheme pickers: the model's own scheme first; compare with Block AttnRes on the same
  // weights.
  auto* scheme = depth->findChild<QComboBox*>("scheme");
  auto* compare = depth->findChild<QComboBox*>("compare");
  ASSERT_NE(scheme, nullptr);
  ASSERT_NE(compare, nullptr);
  EXPECT_EQ(scheme->currentText(), "model's own: Full AttnRes");
  EXPECT_EQ(compare->currentText(), "none");
  EXPECT_EQ(depth->heatmaps().size(), 1u);
  compare->setCurrentIndex(compare->findData("block"));
  settle();
  const auto maps = depth->heatmaps();
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_EQ(maps[0]->values().size(), 5u);  // L + 1 reads of the 2-layer model
  EXPECT_EQ(maps[0]->title(), "trained Full AttnRes: alpha (mean over tokens)");
  EXPECT_EQ(maps[1]->title(),
            "Block AttnRes (S = 2) on the trained Full AttnRes model: alpha (mean over tokens)");
  EXPECT_TRUE(depth->findChild<QSpinBox*>("block_size")
                  ->isEnabled());  // S of the Block reads on these weights

  // A trained Block model: S is the model's own.
  choose(depth, "trained: Block AttnRes N = 2 (S = 4)");
  auto* block_size = depth->findChild<QSpinBox*>("block_size");
  EXPECT_EQ(block_size->value(), 4);
  EXPECT_FALSE(block_size->isEnabled());
  EXPECT_EQ(scheme->currentText(), "model's own: Block AttnRes (S = 4)");
  EXPECT_EQ(maps[0]->title(), "trained Block AttnRes (S = 4): alpha (mean over tokens)");
  EXPECT_EQ(maps[1]->title(),
            "trained Block AttnRes (S = 4): alpha (mean over tokens)");  // block at the model's S
  scheme->setCurrentIndex(scheme->findData("full"));
  settle();
  EXPECT_EQ(maps[0]->title(),
            "Full AttnRes on the trained Block AttnRes (S = 4) model: alpha (mean over tokens)");
  scheme->setCurrentIndex(0);
  settle();
  EXPECT_EQ(window->error_text(), "");

  // The random model: its own settings come back.
  choose(depth, "random model (the settings below)");
  EXPECT_EQ(layers->value(), 4);
  EXPECT_TRUE(layers->isEnabled());
  EXPECT_TRUE(block_size->isEnabled());
  EXPECT_EQ(block_size->value(), 2);
  EXPECT_EQ(tokens->text(), "1 7 42 7 99 3");
  EXPECT_EQ(maps[0]->values().size(), 9u);                        // 4 layers: L + 1 = 9
  EXPECT_EQ(scheme->currentText(), "model's own: Full AttnRes");  // the random model's queries
  EXPECT_EQ(maps[0]->title(), "Full AttnRes: alpha (mean over tokens)");
  EXPECT_EQ(maps[1]->title(), "Block AttnRes (S = 2): alpha (mean over tokens)");
  EXPECT_EQ(token->count(), 7);
  EXPECT_EQ(token->itemText(1), "token 0 (id 1)");
  layers->setValue(3);  // the random model's spin boxes still drive it
  settle();
  EXPECT_EQ(maps[0]->values().size(), 7u);

  // Tokens the user typed survive a change of model; the random settings are kept for later.
  choose(depth, "trained: Full AttnRes");
  EXPECT_EQ(layers->value(), 2);
  tokens->setText("84 104 101");
  emit tokens->textEdited(tokens->text());
  emit tokens->editingFinished();
  settle();
  EXPECT_EQ(token->count(), 4);
  choose(depth, "random model (the settings below)");
  EXPECT_EQ(layers->value(), 3);
  EXPECT_EQ(tokens->text(), "84 104 101");
  EXPECT_EQ(window->error_text(), "");

  // One lesson model: Magnitudes shows the model chosen in Depth attention and marks the scheme
  // it was trained with; Duality follows it.
  choose(depth, "trained: Full AttnRes");
  View* magnitudes = window->view("magnitudes");
  std::vector<std::string> names;
  const auto charts = magnitudes->charts();
  ASSERT_FALSE(charts.empty());
  for (const auto& series : charts.front().series) names.push_back(series.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"trained Full AttnRes", "standard residual (reference)"}));
  EXPECT_EQ(charts.front().title,
            "RMS of each sublayer's input h_l on the weights of the trained Full AttnRes model");
  View* duality = window->view("duality");
  EXPECT_EQ(window->findChild<QComboBox*>("model_choice")->currentText(), "trained: Full AttnRes");
  choose(duality, "trained: standard residual");
  EXPECT_EQ(duality->findChild<QComboBox*>("scheme")->currentText(),
            "model's own: standard residual");
  EXPECT_NE(duality->heatmaps()[0]->title().find("standard"), std::string::npos)
      << duality->heatmaps()[0]->title();
  EXPECT_EQ(window->error_text(), "");

  // File > Open model directory adds a "loaded" entry to every model view.
  ASSERT_TRUE(window->open_model(dir / "models" / "block_N4"));
  EXPECT_EQ(combo->count(), 6);
  EXPECT_EQ(combo->currentText().toStdString(),
            "loaded: " + (dir / "models" / "block_N4").string());
  EXPECT_EQ(block_size->value(), 2);
  EXPECT_FALSE(block_size->isEnabled());
  EXPECT_EQ(maps[0]->title(), "loaded Block AttnRes (S = 2): alpha (mean over tokens)");
  EXPECT_EQ(scheme->currentText(), "model's own: Block AttnRes (S = 2)");
  EXPECT_EQ(window->error_text(), "");
}

TEST(Gui, ModelViewsStartOnTheRandomModelWithoutShippedModels) {
  test::TempDir dir;
  fs::create_directories(dir / "empty");
  // A directory with only half a model: not available.
  fs::create_directories(dir / "half" / "full");
  write_file_atomically(dir / "half" / "full" / "config.json", "{}");
  for (const fs::path& models : {dir / "empty", dir / "half", dir / "missing", fs::path()}) {
    std::unique_ptr<MainWindow> window;
    {
      const ModelsDirectory override_dir(models);
      EXPECT_TRUE(available_shipped_models().empty()) << models;
      window = std::make_unique<MainWindow>(true);
    }
    window->recompute_all();
    EXPECT_EQ(window->error_text(), "") << models;
    // One lesson model for the three model views.
    const auto combos = window->findChildren<QComboBox*>("model_choice");
    ASSERT_EQ(combos.size(), 1);
    EXPECT_EQ(combos[0]->count(), 1);
    EXPECT_EQ(combos[0]->currentText(), "random model (the settings below)");
    View* depth = window->view("depth-attention");
    EXPECT_EQ(depth->heatmaps()[0]->values().size(), 9u);
    EXPECT_EQ(depth->findChild<QLineEdit*>("tokens")->text(), "1 7 42 7 99 3");
    EXPECT_TRUE(depth->findChild<QSpinBox*>("layers")->isEnabled());
  }
}

// The line about a trained model reads its log with the trainer's reader (read_train_log).
TEST(Gui, TrainingLogSummaryReadsTheLastValidationLoss) {
  test::TempDir dir;
  EXPECT_EQ(training_log_summary(dir / "none.csv"), "");
  TrainLogRow start, step;
  start.val_loss = 5.5;
  step.step = 600;
  step.train_loss = 1.4;
  step.output_rms = step.output_grad_rms = {1.0, 1.0};
  write_file_atomically(dir / "no_val.csv", train_log_csv({step}, 2));
  EXPECT_EQ(training_log_summary(dir / "no_val.csv"), "");
  step.val_loss = 1.523;
  write_file_atomically(dir / "one.csv", train_log_csv({start, step}, 2));
  EXPECT_EQ(training_log_summary(dir / "one.csv", "lab-corpus.txt"),
            "trained 600 steps on lab-corpus.txt, validation loss 5.50 \u2192 1.52 nats/token");
  step.step = 10;
  step.val_loss = 2;
  write_file_atomically(dir / "last.csv", train_log_csv({step}, 2));
  EXPECT_EQ(training_log_summary(dir / "last.csv"),
            "trained 10 steps, validation loss 2.00 nats/token");
  // Not a log the trainer wrote: no line (the trainer's reader refuses it).
  write_file_atomically(dir / "bad.csv", "step,val_loss\n10,2\n");
  EXPECT_EQ(training_log_summary(dir / "bad.csv"), "");
}

TEST(Gui, CancelledBackgroundWorkIsDiscarded) {
  MainWindow window(false);
  bool applied = false;
  window.run(window.current_view(), "test work",
             [&](const Progress&) -> std::function<void()> { return [&] { applied = true; }; });
  window.cancel_background();
  window.wait_for_workers();
  settle();
  EXPECT_FALSE(applied);
  window.run(window.current_view(), "test work",
             [&](const Progress&) -> std::function<void()> { return [&] { applied = true; }; });
  window.wait_for_workers();
  settle();
  EXPECT_TRUE(applied);
}

// Background work that reports progress until its run is cancelled or `release` is set (or 30 s
// pass, so that a failing test never hangs). Records what it saw.
struct LoopingWork {
  std::atomic<bool> release{false};
  std::atomic<bool> started{false};
  std::atomic<bool> saw_cancel{false};
  std::atomic<std::size_t> calls{0};
  std::atomic<bool> on_gui_thread{false};
  bool applied = false;
  BackgroundWork work() {
    return [this](const Progress& progress) -> std::function<void()> {
      on_gui_thread = QThread::currentThread() == QApplication::instance()->thread();
      QElapsedTimer timer;
      timer.start();
      for (std::size_t i = 0; !release.load() && timer.elapsed() < 30000; ++i) {
        try {
          report_progress(progress, std::min<std::size_t>(i, 500), 1000, "looping work");
        } catch (const Cancelled&) {
          saw_cancel = true;
          throw;
        }
        ++calls;
        started = true;
        QThread::usleep(200);
      }
      return [this] { applied = true; };
    };
  }
};

TEST(Gui, CancelledRunIsNeverAppliedEvenAfterANewerRunStarts) {
  MainWindow window(false);
  // Run A ignores its progress callback on purpose: it ends only when released, after the
  // Cancel and after run B (another label) started, so nothing but its own token can stop it.
  std::atomic<bool> release_a{false};
  bool applied_a = false, applied_b = false;
  window.run(window.current_view(), "run a", [&](const Progress&) -> std::function<void()> {
    QElapsedTimer timer;
    timer.start();
    while (!release_a.load() && timer.elapsed() < 30000) QThread::msleep(1);
    return [&] { applied_a = true; };
  });
  window.cancel_background();
  window.run(window.current_view(), "run b",
             [&](const Progress&) -> std::function<void()> { return [&] { applied_b = true; }; });
  release_a = true;
  ASSERT_TRUE(wait_until([&] { return window.runs_in_flight() == 0; }));
  settle();
  EXPECT_FALSE(applied_a);
  EXPECT_TRUE(applied_b);
  EXPECT_EQ(window.error_text(), "");
}

TEST(Gui, CancelEndsTheWorkerAndProgressDrivesTheBar) {
  MainWindow window(false);
  auto* bar = window.findChild<QProgressBar*>();
  ASSERT_NE(bar, nullptr);
  LoopingWork loop;
  window.run(window.current_view(), "looping", loop.work());
  // The worker's (500, 1000) reaches the bar through the GUI thread's event loop.
  ASSERT_TRUE(wait_until([&] { return bar->maximum() == 1000 && bar->value() == 500; }))
      << bar->minimum() << ".." << bar->maximum() << " at " << bar->value();
  EXPECT_TRUE(bar->isVisibleTo(&window));
  window.cancel_background();
  QElapsedTimer timer;
  timer.start();
  ASSERT_TRUE(wait_until([&] { return window.runs_in_flight() == 0; }));
  EXPECT_LT(timer.elapsed(), 10000);  // the loop stops at its next check, not after 30 s
  EXPECT_TRUE(loop.saw_cancel);
  EXPECT_FALSE(loop.on_gui_thread);
  EXPECT_FALSE(loop.applied);
  EXPECT_FALSE(bar->isVisibleTo(&window));
  EXPECT_EQ(window.error_text(), "");  // Cancelled is not an error
}

TEST(Gui, CancelStopsARealForwardPassAtTheNextSublayer) {
  ModelConfig config;
  config.hidden_size = 16;
  config.num_hidden_layers = 32;  // 64 sublayers
  config.num_attention_heads = 2;
  config.num_key_value_heads = 2;
  config.intermediate_size = 24;
  config.vocab_size = 50;
  const auto model = random_model(config, {.seed = 3, .query_std = 1.0});
  const std::vector<int> tokens = {1, 2, 3, 4};
  MainWindow window(false);
  std::atomic<bool> at_second_sublayer{false}, cancel_clicked{false}, threw_cancelled{false};
  std::atomic<std::size_t> last_check{0};
  bool applied = false;
  window.run(window.current_view(), "forward",
             [&](const Progress& progress) -> std::function<void()> {
               ForwardOptions options;
               options.mode = ResidualMode::full;
               // Holds the pass at sublayer 1 until Cancel was pressed, then asks the run's
               // callback.
               options.progress = [&, progress](std::size_t done, std::size_t total) {
                 last_check = done;
                 if (done == 1) {
                   at_second_sublayer = true;
                   QElapsedTimer timer;
                   timer.start();
                   while (!cancel_clicked.load() && timer.elapsed() < 30000) QThread::msleep(1);
                 }
                 return progress(done, total);
               };
               try {
                 forward(model, tokens, options);
               } catch (const Cancelled&) {
                 threw_cancelled = true;
                 throw;
               }
               return [&] { applied = true; };
             });
  ASSERT_TRUE(wait_until([&] { return at_second_sublayer.load(); }));
  window.cancel_background();
  cancel_clicked = true;
  ASSERT_TRUE(wait_until([&] { return window.runs_in_flight() == 0; }));
  settle();
  EXPECT_TRUE(threw_cancelled);
  EXPECT_EQ(last_check.load(), 1u);  // of 64: the pass ended at the first check after Cancel
  EXPECT_FALSE(applied);
  EXPECT_EQ(window.error_text(), "");
}

TEST(Gui, ConcurrentRunsAreCancelledIndependently) {
  MainWindow window(false);
  LoopingWork a, b;
  window.run(window.current_view(), "run a", a.work());
  window.run(window.current_view(), "run b", b.work());
  ASSERT_TRUE(wait_until([&] { return a.started.load(); }));
  window.cancel_run("run a");
  ASSERT_TRUE(wait_until([&] { return a.saw_cancel.load(); }));
  // B goes on: its callback keeps saying "continue" after A was cancelled and stopped.
  const std::size_t calls = b.calls;
  ASSERT_TRUE(wait_until([&] { return b.calls > calls + 20; }));
  EXPECT_FALSE(b.saw_cancel);
  EXPECT_EQ(window.runs_in_flight(), 1u);
  b.release = true;
  ASSERT_TRUE(wait_until([&] { return window.runs_in_flight() == 0; }));
  settle();
  EXPECT_FALSE(a.applied);
  EXPECT_TRUE(b.applied);
  EXPECT_FALSE(b.saw_cancel);
  // Cancel (all runs) does not reach a run started after it.
  LoopingWork c;
  window.cancel_background();
  window.run(window.current_view(), "run c", c.work());
  ASSERT_TRUE(wait_until([&] { return c.calls > 20; }));
  c.release = true;
  ASSERT_TRUE(wait_until([&] { return window.runs_in_flight() == 0; }));
  settle();
  EXPECT_FALSE(c.saw_cancel);
  EXPECT_TRUE(c.applied);
}

TEST(Gui, ANewerRunWithTheSameLabelStopsTheOlderOne) {
  MainWindow window(false);
  LoopingWork old_run, new_run;
  window.run(window.current_view(), "same", old_run.work());
  ASSERT_TRUE(wait_until([&] { return old_run.started.load(); }));
  window.run(window.current_view(), "same", new_run.work());
  ASSERT_TRUE(wait_until([&] { return old_run.saw_cancel.load(); }));
  new_run.release = true;
  ASSERT_TRUE(wait_until([&] { return window.runs_in_flight() == 0; }));
  settle();
  EXPECT_FALSE(old_run.applied);
  EXPECT_TRUE(new_run.applied);
  EXPECT_FALSE(new_run.saw_cancel);
  EXPECT_EQ(window.error_text(), "");
}

TEST(Gui, ClosingTheWindowCancelsAndWaitsForRunsInFlight) {
  LoopingWork loop;
  {
    MainWindow window(false);
    window.run(window.current_view(), "looping", loop.work());
    ASSERT_TRUE(wait_until([&] { return loop.started.load(); }));
  }
  // The destructor cancelled the run and waited: the work has already ended.
  EXPECT_TRUE(loop.saw_cancel);
  EXPECT_FALSE(loop.applied);
  settle();
}

TEST(Gui, PipelineViewReportsProgressAndItsCancelledRunIsNotApplied) {
  MainWindow window(false);
  View* pipeline = window.view("pipeline");
  auto* bar = window.findChild<QProgressBar*>();
  auto* summary = pipeline->findChild<QLabel*>("pipeline_summary");
  ASSERT_NE(summary, nullptr);
  // A schedule of a few million operations: over a second to simulate in full in Release
  // (384 x 128 x 16 = 786,432 micro-batch and chunk pairs, under the simulator's bound of 10^6).
  pipeline->findChild<QSpinBox*>("sublayers")->setValue(4096);
  pipeline->findChild<QSpinBox*>("microbatches")->setValue(384);
  pipeline->findChild<QSpinBox*>("pp")->setValue(128);
  pipeline->findChild<QSpinBox*>("vpp")->setValue(16);
  settle();  // one coalesced recompute starts the run
  ASSERT_EQ(window.runs_in_flight(), 1u);
  // The simulation's (ops placed, ops in all) reaches the bar: the view passed the callback on.
  ASSERT_TRUE(wait_until([&] { return bar->maximum() == 1000; }));
  window.cancel_background();
  ASSERT_TRUE(wait_until([&] { return window.runs_in_flight() == 0; }));
  settle();
  EXPECT_EQ(summary->text(), "");  // never applied
  EXPECT_EQ(window.error_text(), "");
}

TEST(Gui, EveryViewComputesInTheBackground) {
  MainWindow window(false);
  window.recompute_all();  // cost sweeps, forward passes and the simulation all off the GUI thread
  EXPECT_GT(window.runs_in_flight(), 0u);
  ASSERT_TRUE(wait_until([&] { return window.runs_in_flight() == 0; }));
  settle();
  EXPECT_EQ(window.error_text(), "");
  EXPECT_EQ(window.view("cost")->charts().size(), 5u);  // the four sweeps and the calibration
  EXPECT_EQ(window.view("cost")->charts().front().marker_x, 8.0);
  for (View* view : window.views()) {
    window.show_view(view->name());
    EXPECT_FALSE(window.export_titles().empty()) << view->name();
  }
  // A scenario's sweep is computed in the background too.
  ASSERT_TRUE(window.open_scenario(fs::path(ATTNRES_SCENARIOS_DIR) / "block-size-tradeoff.toml"));
  auto* sweep = window.view("cost")->findChild<QComboBox*>("scenario_sweep");
  sweep->setCurrentIndex(1);
  ASSERT_TRUE(wait_until([&] { return window.runs_in_flight() == 0; }));
  settle();
  EXPECT_EQ(window.view("cost")->charts().front().id, "tradeoff_io");
  EXPECT_EQ(window.error_text(), "");
}

TEST(Gui, ScreenshotOfEveryViewIsNotBlank) {
  test::TempDir dir;
  for (const char* view :
       {"cost", "depth-attention", "magnitudes", "pipeline", "duality", "scaling"}) {
    const fs::path png = dir / (std::string(view) + ".png");
    const std::string command = "QT_QPA_PLATFORM=offscreen " + std::string(ATTNRES_GUI_BINARY) +
                                " --view " + view + " --screenshot " + png.string() + " > " +
                                (dir / "log.txt").string() + " 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0) << view << ": " << read_file(dir / "log.txt");
    const QImage image(QString::fromStdString(png.string()));
    ASSERT_FALSE(image.isNull()) << view;
    EXPECT_EQ(image.size(), QSize(1400, 900));
    std::set<QRgb> colours;
    for (int y = 0; y < image.height(); y += 9) {
      for (int x = 0; x < image.width(); x += 9) colours.insert(image.pixel(x, y));
    }
    EXPECT_GT(colours.size(), 20u) << view << " looks blank";
  }
  const std::string bad =
      std::string(ATTNRES_GUI_BINARY) + " --view nowhere --screenshot x.png > /dev/null 2>&1";
  const int status = std::system(("QT_QPA_PLATFORM=offscreen " + bad).c_str());
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

// --help and --models print and exit without a display (no DISPLAY, no QT_QPA_PLATFORM).
TEST(Gui, InformationalFlagsNeedNoDisplay) {
  test::TempDir dir;
  for (const char* flag : {"--help", "--models", "--version"}) {
    const fs::path log = dir / "log.txt";
    const std::string command = "env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM " +
                                std::string(ATTNRES_GUI_BINARY) + " " + flag + " > " +
                                log.string() + " 2>&1";
    const int status = std::system(command.c_str());
    ASSERT_TRUE(WIFEXITED(status)) << flag << ": " << read_file(log);
    EXPECT_EQ(WEXITSTATUS(status), 0) << flag << ": " << read_file(log);
    const std::string text = read_file(log);
    EXPECT_NE(text.find(flag == std::string("--help")     ? "--screenshot"
                        : flag == std::string("--models") ? "models directory: "
                                                          : "attnres-lab "),
              std::string::npos)
        << flag << ": " << text;
  }
}

// ------------------------------------------------------------------ scheme pickers of the model
// views

// A window on the random model (4 layers, L = 8, d = 64, Full AttnRes with queries of std 0.5).
std::unique_ptr<MainWindow> random_model_window(bool synchronous = true) {
  std::unique_ptr<MainWindow> window;
  {
    const ModelsDirectory no_models{fs::path()};
    window = std::make_unique<MainWindow>(synchronous);
  }
  window->recompute_all();
  return window;
}

// Chooses a named scheme (or "@own" / "@none") from a picker's list.
void pick_scheme(View* view, const char* picker, const char* name) {
  auto* combo = view->findChild<QComboBox*>(picker);
  ASSERT_NE(combo, nullptr) << view->name() << " " << picker;
  const int index = combo->findData(QString(name));
  ASSERT_GE(index, 0) << name;
  combo->setCurrentIndex(index);
  emit combo->activated(
      index);  // as a click in the list: counts even when the index was already that one
  settle();
}

// Types a scheme spec into a picker and presses Enter.
void type_scheme(View* view, const char* picker, const QString& spec) {
  auto* combo = view->findChild<QComboBox*>(picker);
  ASSERT_NE(combo, nullptr) << view->name() << " " << picker;
  combo->setEditText(spec);
  emit combo->lineEdit()->editingFinished();
  settle();
}

// Every cell on or below the diagonal is `value` (within `relative` of it), every cell above it
// empty.
void expect_lower_triangle(const std::vector<std::vector<double>>& values, double value,
                           double relative) {
  for (std::size_t r = 0; r < values.size(); ++r) {
    for (std::size_t c = 0; c < values[r].size(); ++c) {
      if (c <= r) {
        EXPECT_TRUE(test::near_relative(values[r][c], value, relative)) << r << "," << c;
      } else {
        EXPECT_TRUE(std::isnan(values[r][c])) << r << "," << c;
      }
    }
  }
}

TEST(Gui, PickingASchemeReadsTheModelWithIt) {
  auto window = random_model_window();
  View* depth = window->view("depth-attention");
  auto* scheme = depth->findChild<QComboBox*>("scheme");
  ASSERT_NE(scheme, nullptr);
  // The model's own scheme first, then the cost explorer's named schemes.
  EXPECT_EQ(scheme->itemText(0), "model's own: Full AttnRes");
  EXPECT_EQ(scheme->itemText(1), "standard");
  EXPECT_EQ(scheme->count(), 1 + static_cast<int>(scheme_names().size()));
  HeatmapWidget* map = depth->heatmaps()[0];
  ASSERT_EQ(map->values().size(), 9u);
  const double full_final_emb = map->values()[8][0];
  EXPECT_GT(std::abs(full_final_emb - 1.0 / 9.0), 1e-3);  // random queries: not a plain mean

  // DenseFormer on these weights starts at weights of exactly 1.
  pick_scheme(depth, "scheme", "denseformer");
  EXPECT_EQ(map->title(), "DenseFormer: alpha (mean over tokens)");
  ASSERT_EQ(map->values().size(), 9u);
  expect_lower_triangle(map->values(), 1.0, 0.0);
  // The rescaled residual: the running mean.
  pick_scheme(depth, "scheme", "rescaled");
  // The mean over the six tokens of 1 / n: 1 / n rounded once, 6 additions and a division: 8 u;
  // 16 u.
  EXPECT_TRUE(test::near_relative(map->values()[8][0], 1.0 / 9.0, test::roundoffs<double>(16)));
  EXPECT_TRUE(test::near_relative(map->values()[3][2], 1.0 / 4.0, test::roundoffs<double>(16)));

  // Multi-head reads: the mean over heads, a note, and a head selector.
  auto* head = depth->findChild<QComboBox*>("head");
  auto* note = depth->findChild<QLabel*>("heads_note");
  EXPECT_FALSE(head->isEnabled());
  EXPECT_TRUE(note->isHidden());
  pick_scheme(depth, "scheme", "full_multihead");
  EXPECT_TRUE(head->isEnabled());
  ASSERT_EQ(head->count(), 17);  // mean + 16 heads of 4 channels (d = 64)
  EXPECT_FALSE(note->isHidden());
  EXPECT_EQ(map->title(), "Full AttnRes, 16 heads: alpha (mean over tokens, mean over 16 heads)");
  const std::vector<double> mean_row = map->values()[8];
  std::vector<double> sum(mean_row.size(), 0.0);
  for (int h = 0; h < 16; ++h) {
    head->setCurrentIndex(h + 1);
    for (std::size_t c = 0; c < sum.size(); ++c) sum[c] += map->values()[8][c] / 16.0;
  }
  EXPECT_EQ(map->title(), "Full AttnRes, 16 heads: alpha (mean over tokens, head 15 of 16)");
  EXPECT_GT(std::abs(map->values()[8][0] - mean_row[0]), 1e-6);  // one head differs from the mean
  // 16 heads over 16 (exact) summed in two orders (positive terms): 15 u each; 32 u.
  for (std::size_t c = 0; c < sum.size(); ++c)
    EXPECT_TRUE(test::near_relative(sum[c], mean_row[c], test::roundoffs<double>(32))) << c;

  // mHC with one stream at its start is the standard residual: M is all ones.
  View* duality = window->view("duality");
  type_scheme(duality, "scheme", "mhc:streams=1");
  EXPECT_EQ(window->error_text(), "");
  HeatmapWidget* mixing = duality->heatmaps()[0];
  EXPECT_EQ(mixing->title(), "depth mixing M: mHC (m = 1) (token mean)");
  ASSERT_EQ(mixing->values().size(), 9u);
  // Products of at most L + 1 coefficients, each 1 at the start (sigmoid(37) rounds to 1,
  // 2 sigmoid(0), a 1 x 1 Sinkhorn), and a mean over the tokens: 64 u.
  expect_lower_triangle(mixing->values(), 1.0, test::roundoffs<double>(64));
  // ... like the standard residual itself.
  pick_scheme(duality, "scheme", "standard");
  expect_lower_triangle(mixing->values(), 1.0, 0.0);
  EXPECT_EQ(window->error_text(), "");
}

TEST(Gui, CompareModeDrawsTwoSchemesSideBySide) {
  auto window = random_model_window();
  // Depth attention: two heatmaps.
  View* depth = window->view("depth-attention");
  ASSERT_EQ(depth->heatmaps().size(), 1u);
  pick_scheme(depth, "compare", "block");
  auto maps = depth->heatmaps();
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_FALSE(maps[1]->isHidden());
  EXPECT_EQ(maps[0]->title(), "Full AttnRes: alpha (mean over tokens)");
  EXPECT_EQ(maps[1]->title(), "Block AttnRes (S = 2): alpha (mean over tokens)");
  EXPECT_EQ(maps[1]->values().size(), 9u);
  EXPECT_EQ(maps[1]->values()[0].size(),
            1u + 4u + 1u);  // the embedding, blocks b1..b4 and the partial sum
  // The model's own scheme can be the second one too.
  pick_scheme(depth, "scheme", "denseformer");
  pick_scheme(depth, "compare", "@own");
  maps = depth->heatmaps();
  EXPECT_EQ(maps[0]->title(), "DenseFormer: alpha (mean over tokens)");
  EXPECT_EQ(maps[1]->title(), "Full AttnRes: alpha (mean over tokens)");
  pick_scheme(depth, "compare", "@none");
  EXPECT_EQ(depth->heatmaps().size(), 1u);
  EXPECT_TRUE(maps[1]->isHidden());

  // Magnitudes: two curve sets in each chart, with the standard residual for reference.
  View* magnitudes = window->view("magnitudes");
  auto names = [magnitudes] {
    std::vector<std::string> out;
    const auto charts = magnitudes->charts();
    for (const auto& series : charts.at(0).series) out.push_back(series.name);
    return out;
  };
  EXPECT_EQ(names(), (std::vector<std::string>{"Full AttnRes", "standard residual (reference)"}));
  pick_scheme(magnitudes, "compare", "mhc");
  EXPECT_EQ(names(), (std::vector<std::string>{"Full AttnRes", "mHC (m = 4)",
                                               "standard residual (reference)"}));
  pick_scheme(magnitudes, "compare", "standard");
  EXPECT_EQ(names(), (std::vector<std::string>{"Full AttnRes", "standard residual"}));
  const auto charts = magnitudes->charts();
  ASSERT_EQ(charts.size(), 2u);
  for (const auto& chart : charts) {
    ASSERT_EQ(chart.series.size(), 2u);
    EXPECT_EQ(chart.series[0].points.size(), 8u);
    EXPECT_NE(chart.series[0].points, chart.series[1].points);
  }

  // Duality: two mixing matrices and both in the rank chart.
  View* duality = window->view("duality");
  ASSERT_EQ(duality->heatmaps().size(), 4u);  // M, sequence attention, running sum, standard M
  pick_scheme(duality, "compare", "standard");
  const auto duality_maps = duality->heatmaps();
  ASSERT_EQ(duality_maps.size(), 5u);  // and the compared scheme's M (second page)
  EXPECT_EQ(duality_maps[0]->title(), "depth mixing M: Full AttnRes (token mean)");
  EXPECT_EQ(duality_maps[1]->title(), "depth mixing M: standard residual (token mean)");
  EXPECT_FALSE(duality_maps[1]->isHidden());  // on the "ranks and every scheme" page
  expect_lower_triangle(duality_maps[1]->values(), 1.0, 0.0);
  const auto duality_charts = duality->charts();  // a copy that outlives the loops
  ASSERT_EQ(duality_charts.size(), 2u);
  std::vector<std::string> series;
  for (const auto& s : duality_charts[0].series) series.push_back(s.name);
  EXPECT_EQ(series, (std::vector<std::string>{"Full AttnRes", "bound: full", "standard residual",
                                              "bound: standard"}));
  for (const auto& point : duality_charts[0].series[2].points) EXPECT_EQ(point.second, 1.0);
  series.clear();
  for (const auto& s : duality_charts[1].series) series.push_back(s.name);
  EXPECT_EQ(series, (std::vector<std::string>{"softmax attention", "running sum"}));
  EXPECT_EQ(window->error_text(), "");
}

TEST(Gui, DualityTaxonomyComesFromComputedMixingMatrices) {
  auto window = random_model_window();
  View* duality = window->view("duality");
  // The Block reference row is at the lesson model's S (it was fixed at 4): S = 4 here.
  window->lesson().block_size->setValue(4);
  settle();
  duality->recompute();
  settle();
  auto* table = duality->findChild<QTableWidget*>("scheme_taxonomy");
  ASSERT_NE(table, nullptr);
  auto row_of = [table](const std::string& scheme) {
    for (int r = 0; r < table->rowCount(); ++r) {
      if (table->item(r, 0)->text().toStdString() == scheme) return r;
    }
    ADD_FAILURE() << "no row '" << scheme << "'";
    return 0;
  };
  auto cell = [table](int row, int column) {
    return table->item(row, column)->text().toStdString();
  };
  auto rank = [&](const std::string& scheme, int column) {
    return std::stoi(cell(row_of(scheme), column));
  };
  // The ranks themselves are tested without a window (tests/gui_models/test_model_views.cpp):
  // here, that the table shows the result's rows as the model computes them.
  const int per_token = 3, bound = 4, holds = 5;
  ASSERT_EQ(table->rowCount(), 1 + 7);  // the picked scheme, then the reference rows
  EXPECT_EQ(cell(0, 0), "scheme ▸ Full AttnRes");
  EXPECT_EQ(rank("standard residual", per_token), 1);
  EXPECT_EQ(cell(row_of("mHC (m = 2)"), bound), "≤ 2: m streams, per token");
  EXPECT_EQ(cell(row_of("Full AttnRes"), bound), "≤ 4: min(k, L+1−k)");
  EXPECT_EQ(cell(row_of("DenseFormer"), 1), "drawn weights 1 + N(0, σ²)");
  EXPECT_EQ(cell(row_of("Block AttnRes (S = 4)"), bound).rfind("≤ 3", 0), 0u);
  for (int r = 0; r < table->rowCount(); ++r) EXPECT_EQ(cell(r, holds), "✓") << cell(r, 0);
  const std::string caption = duality->findChild<QLabel*>("taxonomy_caption")->text().toStdString();
  EXPECT_NE(caption.find("L = 8, T = 6 tokens"), std::string::npos) << caption;
  // The picked and compared schemes have rows too; a window over depth obeys its own bound.
  type_scheme(duality, "scheme", "full:window=2");
  pick_scheme(duality, "compare", "mhc");
  ASSERT_EQ(table->rowCount(), 2 + 7);
  EXPECT_EQ(cell(0, 0), "scheme ▸ Full AttnRes, window 2");
  EXPECT_EQ(cell(1, 0), "compare ▸ mHC (m = 4)");
  EXPECT_LE(std::stoi(cell(0, per_token)), 2);
  EXPECT_EQ(cell(1, per_token), "1");  // mHC at its start: the standard residual
  for (int r = 0; r < table->rowCount(); ++r) EXPECT_EQ(cell(r, holds), "✓") << cell(r, 0);
  EXPECT_EQ(window->error_text(), "");
}

TEST(Gui, BadSchemeShowsTheBannerAndTheViewsKeepWorking) {
  auto window = random_model_window();
  View* depth = window->view("depth-attention");
  HeatmapWidget* map = depth->heatmaps()[0];
  type_scheme(depth, "scheme", "full:heads=3");
  EXPECT_NE(depth->error_text().find(
                "scheme 'full:heads=3': attn_res.heads (3) must be a positive divisor of "
                "hidden_size (64)"),
            std::string::npos)
      << depth->error_text();
  EXPECT_EQ(map->title(), "Full AttnRes: alpha (mean over tokens)");  // the last map stays
  type_scheme(depth, "scheme", "fulll");
  EXPECT_NE(depth->error_text().find("scheme 'fulll': unknown scheme 'fulll'"), std::string::npos)
      << depth->error_text();
  // A good choice clears the banner and draws.
  pick_scheme(depth, "scheme", "block");
  EXPECT_EQ(depth->error_text(), "");
  EXPECT_EQ(map->title(), "Block AttnRes (S = 2): alpha (mean over tokens)");
  type_scheme(depth, "compare", "block:block_size=99");
  EXPECT_NE(depth->error_text().find(
                "compare with 'block:block_size=99': block_size must be between 1 and L = 8 "
                "sublayers, got 99"),
            std::string::npos)
      << depth->error_text();
  EXPECT_EQ(depth->heatmaps().size(), 1u);
  pick_scheme(depth, "compare", "@none");
  EXPECT_EQ(depth->error_text(), "");

  View* duality = window->view("duality");
  auto* table = duality->findChild<QTableWidget*>("scheme_taxonomy");
  type_scheme(duality, "compare", "block:heads=5");
  EXPECT_NE(duality->error_text().find("compare with 'block:heads=5'"), std::string::npos)
      << duality->error_text();
  EXPECT_EQ(depth->error_text(), "");   // errors belong to their tab
  EXPECT_EQ(table->rowCount(), 1 + 7);  // the last table stays
  pick_scheme(duality, "compare", "full_sigmoid");
  EXPECT_EQ(duality->error_text(), "");
  EXPECT_EQ(table->rowCount(), 2 + 7);

  View* magnitudes = window->view("magnitudes");
  type_scheme(magnitudes, "scheme", "mhc:streams=0");
  EXPECT_NE(magnitudes->error_text().find("streams"), std::string::npos)
      << magnitudes->error_text();
  pick_scheme(magnitudes, "scheme", "@own");
  EXPECT_EQ(magnitudes->error_text(), "");

  // In the background too: the error of a worker reaches the banner, and the window goes on.
  auto background = random_model_window(false);
  ASSERT_TRUE(wait_until([&] { return background->runs_in_flight() == 0; }));
  settle();
  View* later = background->view("depth-attention");
  type_scheme(later, "scheme", "full:heads=3");
  ASSERT_TRUE(wait_until([&] { return background->runs_in_flight() == 0; }));
  settle();
  EXPECT_NE(later->error_text().find("heads (3)"), std::string::npos) << later->error_text();
  pick_scheme(later, "scheme", "full_multihead");
  ASSERT_TRUE(wait_until([&] { return background->runs_in_flight() == 0; }));
  settle();
  EXPECT_EQ(later->error_text(), "");
  EXPECT_NE(later->heatmaps()[0]->title().find("16 heads"), std::string::npos);
}

// Compare mode of the three model views, drawn at the screenshot size (on the shipped trained
// models when resources/models holds them). Set ATTNRES_SCHEMES_SCREENSHOTS=DIR to keep the
// pictures (docs/images/schemes-*.png).
TEST(Gui, CompareModeOfEveryModelViewDraws) {
  test::TempDir dir;
  const char* keep = std::getenv("ATTNRES_SCHEMES_SCREENSHOTS");
  MainWindow window(true);
  window.recompute_all();
  window.resize(1400, 900);
  window.show();
  const std::pair<const char*, const char*> shots[] = {
      {"depth-attention", "block"}, {"magnitudes", "full_sigmoid"}, {"duality", "block"}};
  for (const auto& [name, compare] : shots) {
    window.show_view(name);
    pick_scheme(window.view(name), "compare", compare);
    QApplication::processEvents();
    EXPECT_EQ(window.error_text(), "") << name;
    const QImage image = window.grab().toImage();
    std::set<QRgb> colours;
    for (int y = 0; y < image.height(); y += 9) {
      for (int x = 0; x < image.width(); x += 9) colours.insert(image.pixel(x, y));
    }
    EXPECT_GT(colours.size(), 20u) << name << " looks blank";
    const fs::path png =
        (keep ? fs::path(keep) : dir.path()) / ("schemes-" + std::string(name) + ".png");
    EXPECT_TRUE(image.save(QString::fromStdString(png.string()), "PNG")) << png;
  }
}

// ------------------------------------------------------------------ the Training view

// The Training view, made the current tab (its errors are in its own banner: error_text() reads the
// current tab's).
TrainingView* training_view(MainWindow& window) {
  window.show_view("training");
  return dynamic_cast<TrainingView*>(window.view("training"));
}

template <typename Widget>
Widget* child(QWidget* parent, const char* name) {
  auto* widget = parent->findChild<Widget*>(name);
  EXPECT_NE(widget, nullptr) << name;
  return widget;
}

// A run that takes well under a second per step: 1 layer (L = 2), d 16, the built-in text.
void configure_tiny_run(TrainingView* view, int steps) {
  child<QSpinBox>(view, "train_layers")->setValue(1);
  child<QSpinBox>(view, "train_d_model")->setValue(16);
  child<QSpinBox>(view, "train_heads")->setValue(2);
  child<QSpinBox>(view, "train_ffn")->setValue(32);
  child<QSpinBox>(view, "train_seq")->setValue(16);
  child<QSpinBox>(view, "train_batch")->setValue(2);
  child<QSpinBox>(view, "train_steps")->setValue(steps);
  child<QDoubleSpinBox>(view, "train_lr")->setValue(1e-2);
  child<QCheckBox>(view, "train_standard")->setChecked(true);
  child<QCheckBox>(view, "train_full")->setChecked(true);
  child<QCheckBox>(view, "train_block")->setChecked(false);
  child<QPushButton>(view, "train_builtin")->click();
}

const ChartSeries* series_named(const ChartSpec& chart, const std::string& name) {
  for (const auto& series : chart.series) {
    if (series.name == name) return &series;
  }
  return nullptr;
}

bool run_ended(const MainWindow& window, const TrainingView* view) {
  return view->state() != TrainingView::State::running && window.runs_in_flight() == 0;
}

TEST(Gui, TrainingViewTrainsTwoSchemesSideBySideAndSavesThem) {
  test::TempDir dir;
  MainWindow window(false);
  TrainingView* view = training_view(window);
  ASSERT_NE(view, nullptr);
  configure_tiny_run(view, 6);
  child<QPushButton>(view, "train_start")->click();
  EXPECT_EQ(view->state(), TrainingView::State::running);
  EXPECT_FALSE(child<QPushButton>(view, "train_start")->isEnabled());
  ASSERT_TRUE(wait_until([&] { return run_ended(window, view); }, 120000));
  settle();
  EXPECT_EQ(window.error_text(), "");
  ASSERT_EQ(view->state(), TrainingView::State::finished);
  EXPECT_EQ(view->steps_done(), 12);  // 6 steps of each scheme
  const auto charts = view->charts();
  ASSERT_EQ(charts.size(), 3u);
  const ChartSpec& loss = charts[0];
  EXPECT_EQ(loss.y_label, "loss (nats/token)");
  for (const std::string scheme : {"standard", "Full AttnRes"}) {
    const ChartSeries* train = series_named(loss, scheme);
    const ChartSeries* val = series_named(loss, scheme + " validation");
    ASSERT_NE(train, nullptr) << scheme;
    ASSERT_NE(val, nullptr) << scheme;
    EXPECT_EQ(train->points.size(), 6u) << scheme;
    ASSERT_GE(val->points.size(), 2u) << scheme;
    EXPECT_EQ(val->points.front().first, 0.0);
    EXPECT_NEAR(val->points.front().second, std::log(256.0), 0.1) << scheme;  // knows nothing yet
    EXPECT_EQ(val->points.back().first, 6.0);
    EXPECT_LT(val->points.back().second, val->points.front().second) << scheme;
    // Magnitude and gradient by depth: one point per sublayer (L = 2).
    EXPECT_EQ(series_named(charts[1], scheme)->points.size(), 2u);
    EXPECT_EQ(series_named(charts[2], scheme)->points.size(), 2u);
  }
  // The alpha map of Full AttnRes: reads sublayer 1, sublayer 2, final; each row sums to one.
  const auto maps = view->heatmaps();
  ASSERT_EQ(maps.size(), 1u);
  ASSERT_EQ(maps[0]->values().size(), 3u);
  for (const auto& row : maps[0]->values()) {
    double sum = 0;
    for (double v : row) sum += std::isnan(v) ? 0 : v;
    // The f32 model: each token's softmax over n <= 3 sources sums to 1 within ~2n u of f32,
    // the mean over the window's 16 tokens adds ~16 u: 64 u of f32.
    EXPECT_TRUE(test::near_relative(sum, 1.0, test::roundoffs<float>(64), 0.0, "row sum"));
  }
  // Save models: one checkpoint directory per scheme.
  ASSERT_TRUE(child<QPushButton>(view, "train_save")->isEnabled());
  view->save_models(dir / "models");
  ASSERT_TRUE(wait_until([&] { return window.runs_in_flight() == 0; }));
  settle();
  EXPECT_EQ(window.error_text(), "");
  for (const char* scheme : {"standard", "full"}) {
    for (const char* file : {"config.json", "model.safetensors", "optimizer.safetensors",
                             "train_state.json", "train_log.csv"}) {
      EXPECT_TRUE(fs::exists(dir / "models" / scheme / file)) << scheme << "/" << file;
    }
  }
  EXPECT_EQ(load_model(dir / "models" / "full").config.attn_res.mode, ResidualMode::full);
  // A directory holding someone else's file is refused, and nothing is written beside it.
  fs::create_directories(dir / "busy" / "full");
  write_file_atomically(dir / "busy" / "full" / "notes.txt", "mine");
  view->save_models(dir / "busy");
  EXPECT_NE(window.error_text().find("holds files attnres did not write"), std::string::npos)
      << window.error_text();
  EXPECT_FALSE(fs::exists(dir / "busy" / "standard"));
  EXPECT_EQ(read_file(dir / "busy" / "full" / "notes.txt"), "mine");
}

// Seeds one after another, compared paired by seed (docs/training.md#statistics): the interval's
// mean is the mean of the per-seed differences that single-seed runs of the same seeds give.
TEST(Gui, TrainingViewComparesSchemesPairedBySeed) {
  MainWindow window(false);
  TrainingView* view = training_view(window);
  ASSERT_NE(view, nullptr);
  configure_tiny_run(view, 4);
  auto train = [&](int seed, int seeds) {
    child<QSpinBox>(view, "train_seed")->setValue(seed);
    child<QSpinBox>(view, "train_seeds")->setValue(seeds);
    child<QPushButton>(view, "train_start")->click();
    EXPECT_TRUE(wait_until([&] { return run_ended(window, view); }, 120000));
    settle();
    EXPECT_EQ(window.error_text(), "");
    EXPECT_EQ(view->state(), TrainingView::State::finished);
  };
  // Full - standard at seed k from a run of that seed alone: the last validation markers.
  auto single_difference = [&](int seed) {
    train(seed, 1);
    const ChartSpec loss = view->charts()[0];
    const auto* full = series_named(loss, "Full AttnRes validation");
    const auto* standard = series_named(loss, "standard validation");
    EXPECT_TRUE(full && standard);
    if (!full || !standard) return std::nan("");
    EXPECT_EQ(full->points.back().first, 4.0);
    return full->points.back().second - standard->points.back().second;
  };
  const double d5 = single_difference(5), d6 = single_difference(6);
  EXPECT_TRUE(view->paired().front().interval.pairs == 1);  // one seed: no interval
  train(5, 2);
  EXPECT_EQ(view->steps_done(), 16);  // 4 steps x 2 schemes x 2 seeds
  const auto paired = view->paired();
  ASSERT_EQ(paired.size(), 1u);
  EXPECT_EQ(paired[0].scheme, "Full AttnRes");
  EXPECT_EQ(paired[0].against, "standard");
  EXPECT_EQ(paired[0].interval.pairs, 2);
  // The same two differences of losses (at most ln 256 = 5.5, the untrained loss), added and
  // halved: a few roundings relative to the losses; 64 u of ln 256.
  EXPECT_TRUE(test::near_relative(paired[0].interval.mean, (d5 + d6) / 2,
                                  test::roundoffs<double>(64), std::log(256.0), "mean"));
  // t_{0.975, 1} = 12.706: the half width of two seeds is 12.706 |d5 - d6| / 2. 12.7062 is t
  // printed to 6 digits: a unit of its last digit, through |d5 - d6| / 2.
  EXPECT_NEAR(paired[0].interval.half_width, 12.7062 * std::abs(d5 - d6) / 2,
              1e-4 * std::abs(d5 - d6) / 2);
  const QString shown = child<QLabel>(view, "train_paired")->text();
  EXPECT_TRUE(shown.contains(QString::fromStdString(paired_sentence(paired[0]))))
      << shown.toStdString();
  EXPECT_TRUE(shown.contains("over 2 finished seeds")) << shown.toStdString();
  // The status names the seed; the charts show the last seed's run.
  EXPECT_TRUE(child<QLabel>(view, "train_status")->text().contains("seed 6 (2 of 2)"));
  EXPECT_EQ(series_named(view->charts()[0], "standard")->points.size(), 4u);
}

TEST(Gui, TrainingViewStopEndsTheWorkerPromptly) {
  MainWindow window(false);
  TrainingView* view = training_view(window);
  ASSERT_NE(view, nullptr);
  configure_tiny_run(view, 100000);
  child<QPushButton>(view, "train_start")->click();
  ASSERT_TRUE(wait_until([&] { return view->steps_done() >= 4; }, 120000));
  // Live updates reach the charts while the run goes on.
  ASSERT_TRUE(wait_until(
      [&] {
        const std::vector<ChartSpec> charts = view->charts();  // by value: keep it while reading
        const ChartSeries* train = series_named(charts[0], "Full AttnRes");
        return train && train->points.size() >= 2;
      },
      120000));
  EXPECT_EQ(view->state(), TrainingView::State::running);
  QElapsedTimer timer;
  timer.start();
  child<QPushButton>(view, "train_stop")->click();
  ASSERT_TRUE(wait_until([&] { return run_ended(window, view); }));
  EXPECT_LT(timer.elapsed(), 5000);  // the step in flight is abandoned, not 100000 steps later
  EXPECT_EQ(view->state(), TrainingView::State::stopped);
  const std::int64_t steps = view->steps_done();
  EXPECT_LT(steps, 100000 * 2);
  settle();
  EXPECT_EQ(view->steps_done(), steps);  // the worker has ended: the counter no longer moves
  EXPECT_EQ(window.error_text(), "");    // stopping is not an error
  EXPECT_TRUE(child<QPushButton>(view, "train_start")->isEnabled());
  EXPECT_FALSE(child<QPushButton>(view, "train_stop")->isEnabled());
  EXPECT_TRUE(child<QPushButton>(view, "train_save")->isEnabled());
  // The curves hold the steps taken before Stop.
  const std::vector<ChartSpec> charts = view->charts();
  const ChartSeries* train = series_named(charts[0], "standard");
  ASSERT_NE(train, nullptr);
  EXPECT_GE(train->points.size(), 2u);
}

TEST(Gui, TrainingViewTrainsAnyOtherSchemeOfTheZoo) {
  MainWindow window(false);
  TrainingView* view = training_view(window);
  ASSERT_NE(view, nullptr);
  configure_tiny_run(view, 4);
  child<QCheckBox>(view, "train_full")->setChecked(false);
  child<QCheckBox>(view, "train_other")->setChecked(true);
  auto* other = child<QComboBox>(view, "train_other_scheme");
  // A spec that does not fit the model is refused before any work, in the banner.
  other->setCurrentText("full:heads=3");
  child<QPushButton>(view, "train_start")->click();
  EXPECT_NE(
      window.error_text().find("attn_res.heads (3) must be a positive divisor of hidden_size (16)"),
      std::string::npos)
      << window.error_text();
  EXPECT_NE(view->state(), TrainingView::State::running);
  // mHC with two streams trains beside the standard residual and learns.
  other->setCurrentText("mhc:streams=2");
  child<QPushButton>(view, "train_start")->click();
  ASSERT_TRUE(wait_until([&] { return run_ended(window, view); }, 120000));
  settle();
  EXPECT_EQ(window.error_text(), "");
  ASSERT_EQ(view->state(), TrainingView::State::finished);
  const auto charts = view->charts();  // keep the charts alive while `val` points into them
  const ChartSeries* val = series_named(charts[0], "mHC (m = 2) validation");
  ASSERT_NE(val, nullptr);
  EXPECT_LT(val->points.back().second, val->points.front().second);
}

TEST(Gui, TrainingViewShowsBadInputsInTheBannerAndKeepsWorking) {
  test::TempDir dir;
  MainWindow window(false);
  TrainingView* view = training_view(window);
  ASSERT_NE(view, nullptr);
  configure_tiny_run(view, 2);
  child<QLineEdit>(view, "train_data")
      ->setText(QString::fromStdString((dir / "missing.txt").string()));
  child<QPushButton>(view, "train_start")->click();
  ASSERT_TRUE(wait_until([&] { return run_ended(window, view); }));
  settle();
  EXPECT_EQ(view->state(), TrainingView::State::failed);
  EXPECT_NE(
      window.error_text().find((dir / "missing.txt").string() + ": cannot read the data file"),
      std::string::npos)
      << window.error_text();
  EXPECT_TRUE(child<QPushButton>(view, "train_start")->isEnabled());
  // A file too short for the sequence length: the core's message.
  write_file_atomically(dir / "short.txt", "tiny text");
  child<QLineEdit>(view, "train_data")
      ->setText(QString::fromStdString((dir / "short.txt").string()));
  child<QPushButton>(view, "train_start")->click();
  ASSERT_TRUE(wait_until([&] { return run_ended(window, view); }));
  settle();
  EXPECT_NE(window.error_text().find("each part needs at least 17"), std::string::npos)
      << window.error_text();
  // No data, a bad shape and no scheme are refused before any work starts.
  child<QLineEdit>(view, "train_data")->setText("");
  child<QPushButton>(view, "train_start")->click();
  EXPECT_NE(window.error_text().find("choose a text file"), std::string::npos)
      << window.error_text();
  child<QLineEdit>(view, "train_data")
      ->setText(QString::fromStdString((dir / "short.txt").string()));
  child<QSpinBox>(view, "train_heads")->setValue(3);
  child<QPushButton>(view, "train_start")->click();
  EXPECT_NE(window.error_text().find("heads (3) must divide d_model (16)"), std::string::npos)
      << window.error_text();
  EXPECT_EQ(window.runs_in_flight(), 0u);
  child<QSpinBox>(view, "train_heads")->setValue(2);
  child<QCheckBox>(view, "train_standard")->setChecked(false);
  child<QCheckBox>(view, "train_full")->setChecked(false);
  child<QPushButton>(view, "train_start")->click();
  EXPECT_NE(window.error_text().find("check at least one scheme"), std::string::npos)
      << window.error_text();
  // The window keeps working: the built-in text trains and the banner clears.
  child<QCheckBox>(view, "train_full")->setChecked(true);
  child<QPushButton>(view, "train_builtin")->click();
  child<QPushButton>(view, "train_start")->click();
  ASSERT_TRUE(wait_until([&] { return run_ended(window, view); }, 120000));
  settle();
  EXPECT_EQ(view->state(), TrainingView::State::finished);
  EXPECT_EQ(window.error_text(), "");
}

// The default settings (three schemes, 2 layers) train to the end and draw every panel. Set
// ATTNRES_TRAINING_SCREENSHOT=PATH.png to keep the picture (scripts/training-screenshot.sh).
TEST(Gui, TrainingViewDefaultRunDrawsEveryPanel) {
  MainWindow window(false);
  TrainingView* view = training_view(window);
  ASSERT_NE(view, nullptr);
  const char* shot = std::getenv("ATTNRES_TRAINING_SCREENSHOT");
  if (!shot)
    child<QSpinBox>(view, "train_steps")->setValue(40);  // the whole 200 only for the picture
  child<QPushButton>(view, "train_builtin")->click();
  window.show_view("training");
  window.resize(1400, 900);
  window.show();
  child<QPushButton>(view, "train_start")->click();
  ASSERT_TRUE(wait_until([&] { return run_ended(window, view); }, 300000));
  settle();
  ASSERT_EQ(view->state(), TrainingView::State::finished) << window.error_text();
  const auto charts = view->charts();
  EXPECT_EQ(charts[0].series.size(), 6u);  // three schemes, training and validation
  for (const auto& chart : charts) {
    for (const auto& series : chart.series)
      EXPECT_FALSE(series.points.empty()) << chart.id << " " << series.name;
  }
  EXPECT_EQ(view->heatmaps()[0]->values().size(), 5u);  // L + 1 reads
  auto* scheme = child<QComboBox>(view, "train_alpha_scheme");
  ASSERT_EQ(scheme->count(), 2);  // Full and Block AttnRes
  const std::string full_title = view->heatmaps()[0]->title();
  scheme->setCurrentIndex(1);
  EXPECT_NE(view->heatmaps()[0]->title(), full_title);
  EXPECT_NE(view->heatmaps()[0]->title().find("Block AttnRes (S = 2)"), std::string::npos);
  scheme->setCurrentIndex(0);
  settle();
  const QImage image = window.grab().toImage();
  std::set<QRgb> colours;
  for (int y = 0; y < image.height(); y += 9) {
    for (int x = 0; x < image.width(); x += 9) colours.insert(image.pixel(x, y));
  }
  EXPECT_GT(colours.size(), 20u);
  if (shot) EXPECT_TRUE(image.save(QString::fromLocal8Bit(shot), "PNG")) << shot;
}

// The model views draw what the core's builders (core/model_charts.hpp) make of the same pass:
// the figures `attnres forward --chart` writes.
// The paper's Fig. 6 losses on the cost explorer's I/O chart come from a 32-sublayer model: on
// another L the view says so, in the core's words.
TEST(Gui, CostViewWarnsWhenTheFig6OverlayIsNotThisModels) {
  MainWindow window(true);
  View* cost = window.view("cost");
  auto* quality = cost->findChild<QComboBox*>("quality_overlay");
  ASSERT_NE(quality, nullptr);
  quality->setCurrentIndex(quality->findData(QString("paper_fig6")));
  cost->recompute();
  auto* warning = cost->findChild<QLabel*>("fig6_warning");
  ASSERT_NE(warning, nullptr);
  EXPECT_FALSE(warning->isHidden());  // L = 128 by default
  SweepSpec overlay;
  overlay.overlay = "paper_fig6";
  CostInputs in;
  in.sublayers = 128;
  in.blocks = 8;
  in.d_model = 1024;
  EXPECT_EQ(warning->text().toStdString(), paper_fig6_warning(overlay, in));
  EXPECT_NE(warning->text().indexOf("(L = 128)"), -1) << warning->text().toStdString();
  EXPECT_NE(cost->charts().front().caption.find(warning->text().toStdString()), std::string::npos);
  cost->findChild<QSpinBox*>("sublayers")->setValue(32);
  settle();
  EXPECT_EQ(window.error_text(), "");
  EXPECT_TRUE(warning->isHidden());
}

// The default quality axis: the published band at the model's L (docs/quality.md) on the I/O,
// history and pipeline charts, its sources under them, as the core computes it.
TEST(Gui, CostViewDrawsThePublishedQualityBandForAnyL) {
  MainWindow window(true);
  View* cost = window.view("cost");
  cost->findChild<QSpinBox*>("sublayers")->setValue(64);
  cost->findChild<QSpinBox*>("blocks")->setValue(8);
  settle();
  cost->recompute();
  ASSERT_TRUE(wait_until([&] { return window.runs_in_flight() == 0; }));
  settle();
  EXPECT_EQ(window.error_text(), "");
  const auto charts = cost->charts();
  ASSERT_GE(charts.size(), 4u);
  const QualityBand band = quality_band(64, {8});
  for (std::size_t i : {0u, 1u, 3u}) {  // I/O, history, pipeline
    const ChartSpec& chart = charts[i];
    SCOPED_TRACE(chart.id);
    EXPECT_EQ(chart.y2_label, kQualityBandAxis);
    const ChartSeries* low = nullptr;
    for (const auto& series : chart.series) {
      if (series.name == "published band, lowest f") low = &series;
    }
    ASSERT_NE(low, nullptr);
    EXPECT_TRUE(low->secondary_axis);
    bool at_8 = false;
    for (const auto& [x, y] : low->points) {
      if (x == 8.0) {
        at_8 = true;
        EXPECT_DOUBLE_EQ(y, band.points[0].low);
      }
    }
    EXPECT_TRUE(at_8);
  }
  auto* note = cost->findChild<QLabel*>("fig6_warning");
  ASSERT_NE(note, nullptr);
  EXPECT_FALSE(note->isHidden());
  EXPECT_NE(note->text().indexOf("Published evidence (docs/quality.md)"), -1);
  EXPECT_NE(note->text().indexOf("lr_attnres"), -1);
  EXPECT_NE(note->text().indexOf("Outside the evidence: L = 64"), -1) << note->text().toStdString();
}

}  // namespace
}  // namespace attnres::gui

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");  // before the application exists
  QApplication app(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

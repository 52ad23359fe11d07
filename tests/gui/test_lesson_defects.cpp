// The smaller defects a run of the lesson in a real window found (issue 30), one test each: veils
// that stayed, sliders that did not follow what they stand for, scenario values clamped in
// silence, command-line flags that failed quietly or aborted, a saved scenario that did not work
// with the CLI, a reference row stuck at S = 4, fields an error did not tint, a window larger than
// its screen, colours that changed from chart to chart.
#include <gtest/gtest.h>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QProcess>
#include <QPushButton>
#include <QScreen>
#include <QSlider>
#include <QSpinBox>
#include <QTableView>
#include <QTableWidget>
#include <QTest>
#include <QtCharts/QChart>
#include <QtCharts/QXYSeries>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "attnres/scenario.hpp"
#include "chart_render.hpp"
#include "duality_results.hpp"
#include "gui_wait.hpp"
#include "lesson.hpp"
#include "lesson_model.hpp"
#include "main_window.hpp"
#include "test_support.hpp"
#include "training_view.hpp"

namespace attnres::gui {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_lesson_defects {

namespace fs = std::filesystem;

void idle(MainWindow& window) {
  ASSERT_TRUE(settle_runs(window));
}

template <typename Widget>
Widget* child(QWidget* parent, const char* name) {
  auto* widget = parent->findChild<Widget*>(name);
  EXPECT_NE(widget, nullptr) << name;
  return widget;
}

// The veils drawn over a view's results right now (StaleOverlay, view.cpp).
int shown_veils(QWidget* view) {
  int count = 0;
  for (QWidget* veil : view->findChildren<QWidget*>("stale_overlay")) {
    if (!veil->isHidden()) ++count;
  }
  return count;
}

std::unique_ptr<MainWindow> shown_window() {
  auto window = std::make_unique<MainWindow>(false);
  window->resize(1024, 700);
  window->show();
  EXPECT_TRUE(QTest::qWaitForWindowExposed(window.get()));
  window->recompute_all();
  idle(*window);
  return window;
}

// A scaling view computes in place, not in a run: a valid input after an invalid one lifts the
// veil (it stayed "not current: the inputs are invalid" forever).
TEST(LessonDefects, ScalingVeilLiftsWhenTheInputsAreValidAgain) {
  auto window = shown_window();
  window->show_view("scaling");
  View* scaling = window->view("scaling");
  auto* from = child<QDoubleSpinBox>(scaling, "curve_from");
  ASSERT_NE(from, nullptr);
  from->setValue(2.5);  // above "curve to" (1.90): invalid
  idle(*window);
  EXPECT_NE(scaling->error_text(), "");
  EXPECT_GT(shown_veils(scaling), 0);
  from->setValue(1.60);
  idle(*window);
  EXPECT_EQ(scaling->error_text(), "");
  EXPECT_TRUE(scaling->stale_reason().isEmpty()) << scaling->stale_reason().toStdString();
  EXPECT_EQ(shown_veils(scaling), 0);
}

// The Training tab's charts show a run, not the form: never veiled, neither after a failed Start
// nor while a run trains nor after Stop.
TEST(LessonDefects, TrainingChartsAreNeverVeiled) {
  auto window = shown_window();
  window->show_view("training");
  auto* view = dynamic_cast<TrainingView*>(window->view("training"));
  ASSERT_NE(view, nullptr);
  child<QLineEdit>(view, "train_data")->setText("/nonexistent/corpus.txt");
  child<QPushButton>(view, "train_start")->click();
  idle(*window);
  EXPECT_NE(view->error_text(), "");  // the failed Start says why ...
  EXPECT_EQ(shown_veils(view), 0);    // ... and veils nothing
  child<QSpinBox>(view, "train_layers")->setValue(1);
  child<QSpinBox>(view, "train_d_model")->setValue(16);
  child<QSpinBox>(view, "train_heads")->setValue(2);
  child<QSpinBox>(view, "train_ffn")->setValue(32);
  child<QSpinBox>(view, "train_seq")->setValue(16);
  child<QSpinBox>(view, "train_batch")->setValue(2);
  child<QSpinBox>(view, "train_steps")->setValue(100000);
  child<QPushButton>(view, "train_builtin")->click();
  child<QPushButton>(view, "train_start")->click();
  ASSERT_EQ(view->state(), TrainingView::State::running);
  ASSERT_TRUE(wait_until([&] { return view->steps_done() >= 3; }, 60000));
  QTest::qWait(400);  // past the 250 ms after which a run's charts used to read "computing…"
  EXPECT_EQ(shown_veils(view), 0);
  child<QPushButton>(view, "train_stop")->click();
  ASSERT_TRUE(wait_until(
      [&] {
        return view->state() != TrainingView::State::running && window->runs_in_flight() == 0;
      },
      60000));
  idle(*window);
  EXPECT_EQ(view->state(), TrainingView::State::stopped);
  EXPECT_EQ(shown_veils(view), 0);  // it shows the stopped run, not "cancelled"
}

// A table under a veiled chart is as stale as the chart.
// S's ▶ animates only where S changes a picture: greyed on the Depth attention view of the
// Full model, enabled once Block is compared with it.
TEST(LessonDefects, BlockSizePlayerIsGreyedWhereSChangesNothing) {
  auto window = shown_window();
  window->show_view("depth-attention");
  idle(*window);
  Player* player = window->lesson().block_player();
  ASSERT_NE(player, nullptr);
  auto* compare = child<QComboBox>(window->view("depth-attention"), "compare");
  compare->setCurrentIndex(compare->findData(QString(kNoScheme)));
  idle(*window);
  EXPECT_FALSE(player->isEnabled());
  compare->setCurrentIndex(compare->findData(QString("block")));
  idle(*window);
  EXPECT_TRUE(player->isEnabled());
  // The Duality view's taxonomy reads S whatever is picked.
  compare->setCurrentIndex(compare->findData(QString(kNoScheme)));
  window->show_view("duality");
  idle(*window);
  EXPECT_TRUE(player->isEnabled());
}

TEST(LessonDefects, TablesAreVeiledWithTheirCharts) {
  auto window = shown_window();
  window->show_view("scaling");
  View* scaling = window->view("scaling");
  child<QDoubleSpinBox>(scaling, "curve_from")->setValue(2.5);
  idle(*window);
  auto* table = scaling->findChild<QTableView*>("scaling_fits");
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(shown_veils(table), 1);
}

// N's slider runs over 1..L: at N = L one more step is not an error, and the handle is not at the
// far left of a 1..100000 range.
TEST(LessonDefects, CostExplorerNSliderRunsOverOneToL) {
  auto window = shown_window();
  window->show_view("cost");
  View* cost = window->view("cost");
  auto* sublayers = child<QSpinBox>(cost, "sublayers");
  auto* blocks = child<QSpinBox>(cost, "blocks");
  auto* slider = child<QSlider>(cost, "blocks_slider");
  sublayers->setValue(16);
  idle(*window);
  EXPECT_EQ(slider->minimum(), 1);
  EXPECT_EQ(slider->maximum(), 16);
  blocks->setValue(16);
  idle(*window);
  slider->setFocus();
  QTest::keyClick(slider, Qt::Key_Right);
  idle(*window);
  EXPECT_EQ(blocks->value(), 16);
  EXPECT_EQ(cost->error_text(), "");
  // An opened scenario moves the range too (its values are set with signals blocked).
  ASSERT_TRUE(window->open_scenario(fs::path(ATTNRES_SCENARIOS_DIR) / "paper-table1.toml"))
      << window->error_text();
  idle(*window);
  EXPECT_EQ(slider->maximum(), sublayers->value());
}

// The pipeline's m moves in multiples of P where the interleaved schedule needs them (V > 1).
TEST(LessonDefects, PipelineMSliderStepsByP) {
  auto window = shown_window();
  window->show_view("pipeline");
  View* pipeline = window->view("pipeline");
  auto* m = child<QSpinBox>(pipeline, "microbatches");
  auto* slider = child<QSlider>(pipeline, "microbatches_slider");
  ASSERT_EQ(child<QSpinBox>(pipeline, "pp")->value(), 4);
  ASSERT_EQ(child<QSpinBox>(pipeline, "vpp")->value(), 2);
  m->setValue(8);
  slider->setFocus();
  QTest::keyClick(slider, Qt::Key_Right);
  EXPECT_EQ(m->value(), 12);
  slider->setValue(14);  // a drag lands on a multiple of P
  EXPECT_EQ(m->value() % 4, 0);
  child<QSpinBox>(pipeline, "pp")->setValue(3);
  m->setValue(9);
  QTest::keyClick(slider, Qt::Key_Right);
  EXPECT_EQ(m->value(), 12);
  child<QSpinBox>(pipeline, "vpp")->setValue(1);  // 1F1B: any m
  QTest::keyClick(slider, Qt::Key_Right);
  EXPECT_EQ(m->value(), 13);
  idle(*window);
  EXPECT_EQ(pipeline->error_text(), "");
}

// A slider is greyed with its box.
TEST(LessonDefects, GreyedBoxesGreyTheirSliders) {
  auto window = shown_window();
  window->show_view("depth-attention");
  LessonModel& lesson = window->lesson();
  auto* slider = lesson.panel()->findChild<QSlider*>("query_std_slider");
  ASSERT_NE(slider, nullptr);
  lesson.query_std->setEnabled(false);
  EXPECT_FALSE(slider->isEnabled());
  lesson.query_std->setEnabled(true);
  EXPECT_TRUE(slider->isEnabled());
}

// A scenario value beyond what a field takes is refused with its name and the range, and nothing
// changes (it was clamped: 10^9 sublayers became L = 100000 while the CLI used 10^9).
TEST(LessonDefects, ScenarioValuesBeyondAFieldAreRefusedNotClamped) {
  test::TempDir dir;
  const fs::path path = dir.path() / "huge.toml";
  {
    std::ofstream out(path);
    out << "title = \"too deep for the GUI\"\n[model]\nsublayers = 1000000000\nblocks = 8\n"
           "d_model = 1024\n";
  }
  auto window = shown_window();
  auto* sublayers = child<QSpinBox>(window->view("cost"), "sublayers");
  const int before = sublayers->value();
  EXPECT_FALSE(window->open_scenario(path));
  const std::string error = window->error_text();
  EXPECT_NE(error.find("huge.toml"), std::string::npos) << error;
  EXPECT_NE(error.find("sublayers = 1000000000"), std::string::npos) << error;
  EXPECT_NE(error.find("1 .. 100000"), std::string::npos) << error;
  EXPECT_NE(error.find("attnres report"), std::string::npos) << error;
  EXPECT_EQ(sublayers->value(), before);
}

// A scenario's lists the Training tab cannot take as they are are said, not dropped in silence.
TEST(LessonDefects, TrainingTabSaysWhatItDoesNotTakeFromAScenario) {
  test::TempDir dir;
  const fs::path path = dir.path() / "lists.toml";
  {
    std::ofstream out(path);
    out << "title = \"lists\"\n[model]\nsublayers = 8\nblocks = 2\nd_model = 64\n"
           "[train]\ndata = \"builtin\"\nlayers = 4\nd_model = 32\nheads = 2\nschemes = "
           "[\"standard\", \"full\", \"block\"]\nblocks = [1, 2, 4]\nsteps = 5\nseq = 16\n"
           "batch = 2\nseeds = [1, 5, 9]\n";
  }
  auto window = shown_window();
  ASSERT_TRUE(window->open_scenario(path)) << window->error_text();
  const QString status = child<QLabel>(window->view("training"), "train_status")->text();
  EXPECT_TRUE(status.contains("blocks lists 3 values of N")) << status.toStdString();
  EXPECT_TRUE(status.contains("not consecutive")) << status.toStdString();
}

// Save scenario keeps an opened [train] table working from wherever the file is saved.
TEST(LessonDefects, SavedScenarioTrainsFromWhereItIsSaved) {
  test::TempDir dir;
  auto window = shown_window();
  ASSERT_TRUE(window->open_scenario(fs::path(ATTNRES_SCENARIOS_DIR) / "block-size-tradeoff.toml"))
      << window->error_text();
  const fs::path saved = dir.path() / "elsewhere" / "saved.toml";
  fs::create_directories(saved.parent_path());
  ASSERT_TRUE(window->save_scenario(saved)) << window->error_text();
  const Scenario reread = load_scenario(saved);
  ASSERT_TRUE(reread.training.has_value());
  EXPECT_TRUE(fs::is_regular_file(reread.training->data_path))
      << reread.training->data_path.string();
}

// The Training tab is a binding of its state (training_state.hpp): opening a scenario gives it the
// state training_state computes, each edit writes into the state, and Save scenario writes the
// edited state so that opening the file again shows it.
TEST(LessonDefects, TrainingTabBindsItsState) {
  test::TempDir dir;
  const fs::path opened = fs::path(ATTNRES_SCENARIOS_DIR) / "block-size-tradeoff.toml";
  auto window = shown_window();
  ASSERT_TRUE(window->open_scenario(opened)) << window->error_text();
  auto* view = dynamic_cast<TrainingView*>(window->view("training"));
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(training_state_json(view->inputs()),
            training_state_json(training_state(load_scenario(opened))));
  child<QSpinBox>(view, "train_layers")->setValue(3);
  child<QSpinBox>(view, "train_block_size")->setValue(2);
  child<QSpinBox>(view, "train_seeds")->setValue(2);
  child<QCheckBox>(view, "train_full")->setChecked(false);
  child<QCheckBox>(view, "train_other")->setChecked(true);
  child<QComboBox>(view, "train_other_scheme")->setCurrentText("mhc:streams=2");
  EXPECT_EQ(view->inputs().layers, 3);
  EXPECT_EQ(view->inputs().block_size, 2);
  EXPECT_EQ(view->inputs().seeds, 2);
  EXPECT_FALSE(view->inputs().full);
  EXPECT_TRUE(view->inputs().other);
  EXPECT_EQ(view->inputs().other_spec, "mhc:streams=2");
  const fs::path saved = dir.path() / "edited.toml";
  ASSERT_TRUE(window->save_scenario(saved)) << window->error_text();
  auto again = shown_window();
  ASSERT_TRUE(again->open_scenario(saved)) << again->error_text();
  auto* reopened = dynamic_cast<TrainingView*>(again->view("training"));
  ASSERT_NE(reopened, nullptr);
  nlohmann::json edited = training_state_json(view->inputs());
  nlohmann::json back = training_state_json(reopened->inputs());
  // The scenario's notes (its other N, eval_every, masks) were not written: nothing to say again.
  edited.erase("not_taken");
  EXPECT_EQ(back["not_taken"], nlohmann::json::array());
  // The data by its absolute path, wherever the file is saved.
  edited["data_path"] =
      fs::absolute(edited["data_path"].get<std::string>()).lexically_normal().string();
  back.erase("not_taken");
  EXPECT_EQ(edited, back) << nlohmann::json::diff(edited, back).dump(1);
  EXPECT_EQ(child<QSpinBox>(reopened, "train_layers")->value(), 3);
  EXPECT_EQ(child<QComboBox>(reopened, "train_other_scheme")->currentText(), "mhc:streams=2");
}

// The Duality table's Block reference row is at the lesson model's S, not fixed at 4.
TEST(LessonDefects, DualityBlockRowFollowsTheLessonS) {
  ModelConfig config;
  config.num_hidden_layers = 4;  // L = 8
  config.attn_res.mode = ResidualMode::full;
  EXPECT_EQ(taxonomy_schemes(config, 2)[2].block_size, 2);
  EXPECT_EQ(taxonomy_schemes(config, 3)[2].block_size, 3);
  EXPECT_EQ(taxonomy_schemes(config, 99)[2].block_size, 8);  // within 1..L
  config.attn_res.mode = ResidualMode::block;
  config.attn_res.block_size = 4;
  EXPECT_EQ(taxonomy_schemes(config, 2)[2].block_size, 4);  // a Block model's own S
}

// A heads error tints the heads field.
TEST(LessonDefects, AHeadsErrorTintsTheHeadsField) {
  auto window = shown_window();
  window->show_view("depth-attention");
  idle(*window);
  LessonModel& lesson = window->lesson();
  if (lesson.random_button->isEnabled()) QTest::mouseClick(lesson.random_button, Qt::LeftButton);
  idle(*window);
  lesson.heads->setValue(3);  // does not divide d = 64
  idle(*window);
  View* depth = window->view("depth-attention");
  ASSERT_NE(depth->error_text(), "");
  const auto fields = depth->error_fields();
  EXPECT_NE(std::find(fields.begin(), fields.end(), static_cast<QWidget*>(lesson.heads)),
            fields.end())
      << depth->error_text();
}

// The window opens no larger than its screen allows (it opened at 1400 x 900 on 1280 x 800).
TEST(LessonDefects, TheWindowFitsTheScreenItOpensOn) {
  MainWindow window(true);
  const QScreen* screen = window.screen();
  ASSERT_NE(screen, nullptr);
  const QSize room = screen->availableGeometry().size().expandedTo(window.minimumSize());
  EXPECT_LE(window.width(), room.width());
  EXPECT_LE(window.height(), room.height());
}

// The command line: a flag's mistake gets its message and a non-zero exit, with or without a
// display (a bad --view aborted in Qt without one); a model directory that does not load ends the
// start (it was ignored and the shipped model shown).
TEST(LessonDefects, CommandLineMistakesGetMessagesNotAborts) {
  const auto run = [](const QStringList& arguments, const QProcessEnvironment& environment) {
    QProcess process;
    process.setProcessEnvironment(environment);
    process.start(ATTNRES_GUI_BINARY, arguments);
    EXPECT_TRUE(process.waitForFinished(60000));
    return std::make_pair(process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1,
                          QString::fromUtf8(process.readAllStandardError()));
  };
  QProcessEnvironment headless = QProcessEnvironment::systemEnvironment();
  headless.remove("DISPLAY");
  headless.remove("WAYLAND_DISPLAY");
  headless.remove("QT_QPA_PLATFORM");
  const auto [view_code, view_error] = run({"--view", "nope"}, headless);
  EXPECT_EQ(view_code, 2);
  EXPECT_TRUE(view_error.contains("--view: unknown view 'nope'")) << view_error.toStdString();
  const auto [help_code, help_error] = run({"--help"}, headless);
  EXPECT_EQ(help_code, 0) << help_error.toStdString();
  const auto [bare_code, bare_error] = run({}, headless);
  EXPECT_EQ(bare_code, 1);
  EXPECT_TRUE(bare_error.contains("no display")) << bare_error.toStdString();

  test::TempDir dir;
  const fs::path broken = dir.path() / "broken";
  fs::create_directories(broken);
  std::ofstream(broken / "config.json") << "{ \"hidden_size\": ";
  QProcessEnvironment offscreen = QProcessEnvironment::systemEnvironment();
  offscreen.insert("QT_QPA_PLATFORM", "offscreen");
  const auto [model_code, model_error] =
      run({"--model", QString::fromStdString(broken.string())}, offscreen);
  EXPECT_EQ(model_code, 2);
  EXPECT_TRUE(model_error.contains("--model")) << model_error.toStdString();
  EXPECT_TRUE(model_error.contains("config.json")) << model_error.toStdString();
}

// One colour per scheme in every chart and export: the renderer picks it by the scheme's name,
// not by the series' place.
TEST(LessonDefects, OneColourPerSchemeInEveryChart) {
  ChartSpec a;
  a.series = {{"standard residual (reference)", {{1, 1}}, ChartSeries::Style::line, false},
              {"Full AttnRes", {{1, 1}}, ChartSeries::Style::line, false}};
  ChartSpec b;
  b.series = {{"Full AttnRes", {{1, 1}}, ChartSeries::Style::line, false},
              {"Block AttnRes (S = 2)", {{1, 1}}, ChartSeries::Style::line, false},
              {"Block AttnRes (S = 4)", {{1, 1}}, ChartSeries::Style::line, false},
              {"standard residual", {{1, 1}}, ChartSeries::Style::line, false},
              {"Full AttnRes validation", {{1, 1}}, ChartSeries::Style::scatter, false}};
  EXPECT_EQ(charts::series_colour(a, 0), charts::series_colour(b, 3));  // standard
  EXPECT_EQ(charts::series_colour(a, 1), charts::series_colour(b, 0));  // Full
  EXPECT_EQ(charts::series_colour(b, 4), charts::series_colour(b, 0));  // its validation points
  EXPECT_NE(charts::series_colour(b, 1), charts::series_colour(b, 2));  // two Block settings
  EXPECT_NE(charts::series_colour(b, 0), charts::series_colour(b, 1));
  // The chart the views and the files draw uses it.
  std::unique_ptr<QChart> chart(charts::build_chart(b));
  const auto series = chart->series();
  ASSERT_GE(series.size(), 2);
  EXPECT_EQ(static_cast<QXYSeries*>(series[0])->color(), charts::series_colour(b, 0));
  EXPECT_EQ(static_cast<QXYSeries*>(series[1])->color(), charts::series_colour(b, 1));
}

}  // namespace test_lesson_defects
}  // namespace attnres::gui

// One state behind every view (issue 43): a shipped scenario opened in the window leaves the cost
// explorer and the Pipeline view computing from exactly the state explorer_state() builds for it —
// the state `attnres-lab --dump-state` writes and tests/gui/check_dump_state.py holds against
// `attnres report`. What each view computes from a state is tested without a window in
// tests/gui_models/.
#include <gtest/gtest.h>

#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QProcess>
#include <QSpinBox>
#include <QTest>
#include <filesystem>
#include <memory>

#include "explorer_results.hpp"
#include "explorer_state.hpp"
#include "gui_wait.hpp"
#include "lesson.hpp"
#include "lesson_model.hpp"
#include "main_window.hpp"
#include "presentation_stage.hpp"
#include "view_kit.hpp"

namespace attnres::gui {
namespace test_view_state {

std::vector<std::filesystem::path> scenarios_with_a_model() {
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(ATTNRES_SCENARIOS_DIR)) {
    if (entry.path().extension() != ".toml") continue;
    if (load_scenario(entry.path()).has_model) found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

TEST(ViewState, EveryShippedScenarioIsComputedAsItSays) {
  const auto scenarios = scenarios_with_a_model();
  ASSERT_GE(scenarios.size(), 10u);
  for (const auto& path : scenarios) {
    MainWindow window(true);
    ASSERT_TRUE(window.open_scenario(path)) << path << ": " << window.error_text();
    ASSERT_TRUE(settle_runs(window));
    const nlohmann::json expected = explorer_state_json(explorer_state(load_scenario(path)));
    for (const char* name : {"cost", "pipeline"}) {
      const nlohmann::json shown = window.view(name)->state_json();
      EXPECT_EQ(shown, expected) << path.filename() << ", " << name << " view:\n"
                                 << nlohmann::json::diff(expected, shown).dump(1);
    }
  }
}

// The case: kimi-k3.toml asks for GB300 (288 GB); the explorer's Memory tab said "of 80 GB"
// (H100) and its hardware picker kept h100.
TEST(ViewState, KimiK3IsCostedOnGb300) {
  MainWindow window(true);
  ASSERT_TRUE(window.open_scenario(std::filesystem::path(ATTNRES_SCENARIOS_DIR) / "kimi-k3.toml"));
  ASSERT_TRUE(settle_runs(window));
  auto* hardware = window.view("cost")->findChild<QComboBox*>("hardware");
  ASSERT_NE(hardware, nullptr);
  EXPECT_EQ(hardware->currentData().toString().toStdString(), "gb300");
  auto* verdict = window.view("cost")->findChild<QLabel*>("memory_verdict");
  ASSERT_NE(verdict, nullptr);
  EXPECT_NE(verdict->text().indexOf("(276.5 GiB)"), -1) << verdict->text().toStdString();
  EXPECT_NE(verdict->text().indexOf("analytic bound"), -1) << verdict->text().toStdString();
  auto* pipeline = window.view("pipeline")->findChild<QComboBox*>("hardware");
  EXPECT_EQ(pipeline->currentData().toString().toStdString(), "gb300");
}

// moe-61-layers-128k.toml: the Pipeline view simulated MHA with t = c = e = D = 1 (5555 GB per
// rank, no fit warning); now it takes the scenario's attention and degrees and says so.
TEST(ViewState, PipelineSaysWhatItTakesWithoutAnInput) {
  MainWindow window(true);
  ASSERT_TRUE(window.open_scenario(std::filesystem::path(ATTNRES_SCENARIOS_DIR) /
                                   "moe-61-layers-128k.toml"));
  ASSERT_TRUE(settle_runs(window));
  const nlohmann::json state = window.view("pipeline")->state_json();
  EXPECT_GT(state["model"]["tp"].get<int>(), 1);
  EXPECT_NE(state["model"]["attention"], "mha");
  auto* taken = window.view("pipeline")->findChild<QLabel*>("pipeline_taken");
  ASSERT_NE(taken, nullptr);
  EXPECT_NE(taken->text().indexOf("tensor"), -1) << taken->text().toStdString();
  auto* summary = window.view("pipeline")->findChild<QLabel*>("pipeline_summary");
  EXPECT_NE(summary->text().indexOf("simulated peak"), -1) << summary->text().toStdString();
  EXPECT_NE(summary->text().indexOf("(79.19 GiB)"), -1) << summary->text().toStdString();
}

// One state per opened scenario: an edit in the Pipeline view (m, the hardware) is what the cost
// explorer's Step tab computes next, and an edit there reaches the Pipeline view; before a
// scenario is opened each keeps its own teaching example.
TEST(ViewState, AnOpenedScenariosStateIsSharedByTheCostViews) {
  MainWindow window(true);
  window.recompute_all();
  ASSERT_TRUE(settle_runs(window));
  View* cost = window.view("cost");
  View* pipeline = window.view("pipeline");
  EXPECT_NE(cost->state_json(), pipeline->state_json());  // the two examples
  ASSERT_TRUE(window.open_scenario(std::filesystem::path(ATTNRES_SCENARIOS_DIR) /
                                   "moe-61-layers-128k.toml"));
  ASSERT_TRUE(settle_runs(window));
  auto* m = pipeline->findChild<QSpinBox*>("microbatches");
  ASSERT_NE(m, nullptr);
  m->setValue(m->value() + 2 * m->singleStep());
  ASSERT_TRUE(settle_runs(window));
  EXPECT_EQ(cost->cost_state()->pipeline.microbatches, m->value());
  EXPECT_EQ(cost->state_json(), pipeline->state_json());
  // The Step tab's headline is the step of the shared state.
  auto* headline = cost->findChild<QLabel*>("step_headline");
  ASSERT_NE(headline, nullptr);
  EXPECT_EQ(headline->text().toStdString(),
            step_headline(evaluate_pipeline(step_settings(*pipeline->cost_state()))));
  // The other way: the cost explorer's hardware reaches the Pipeline view.
  auto* hardware = cost->findChild<QComboBox*>("hardware");
  hardware->setCurrentIndex(hardware->findData(QString("h200")));
  ASSERT_TRUE(settle_runs(window));
  EXPECT_EQ(pipeline->cost_state()->hardware.name, cost->cost_state()->hardware.name);
  EXPECT_EQ(pipeline->findChild<QComboBox*>("hardware")->currentData().toString(), "h200");
  EXPECT_EQ(window.error_text(), "");
}

// The lesson sets states: step 11's text says "m raised from 8 to 32 (at 50 GB/s)", and the view
// computes exactly that (it used to put the link back to 200 GB/s first). Every step runs without
// an error: a step naming an input or entry its view lacks fails with a message.
TEST(ViewState, EveryLessonStepShowsWhatItsTextSays) {
  MainWindow window(true);
  window.recompute_all();
  const auto& steps = lesson_steps();
  for (std::size_t i = 0; i < steps.size(); ++i) {
    window.lesson_step(static_cast<int>(i));
    ASSERT_TRUE(settle_runs(window));
    EXPECT_EQ(window.error_text(), "") << "step " << i + 1 << ": " << steps[i].title;
  }
  const auto at = [&](const std::string& title_start) {
    for (std::size_t i = 0; i < steps.size(); ++i)
      if (steps[i].title.rfind(title_start, 0) == 0) return static_cast<int>(i);
    ADD_FAILURE() << "no step " << title_start;
    return 0;
  };
  const int more_microbatches = at("Pipeline: more micro-batches");
  EXPECT_NE(steps[static_cast<std::size_t>(more_microbatches)].action.find("50 GB/s"),
            std::string::npos);
  window.lesson_step(more_microbatches);
  ASSERT_TRUE(settle_runs(window));
  const nlohmann::json state = window.view("pipeline")->state_json();
  EXPECT_EQ(state["pipeline"]["microbatches"], 32);
  EXPECT_EQ(state["pipeline"]["link_bandwidth_bytes_per_second"], 50e9) << state["pipeline"].dump();
  window.lesson_step(at("Cost explorer: what Block saves"));
  ASSERT_TRUE(settle_runs(window));
  EXPECT_EQ(window.view("cost")->state_json()["model"]["blocks"], 8);
  EXPECT_EQ(window.view("cost")->state_json()["model"]["sublayers"], 128);
}

// What presenter clickers send moves the lesson; Space never ends it.
TEST(ViewState, ClickerKeysMoveTheLesson) {
  MainWindow window(false);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  window.lesson_step(0);
  QTest::keyClick(&window, Qt::Key_PageDown);
  EXPECT_EQ(window.lesson_index(), 1);
  QTest::keyClick(&window, Qt::Key_Right);
  EXPECT_EQ(window.lesson_index(), 2);
  QTest::keyClick(&window, Qt::Key_PageUp);
  EXPECT_EQ(window.lesson_index(), 1);
  const int last = static_cast<int>(lesson_steps().size()) - 1;
  window.lesson_step(last);
  QTest::keyClick(&window, Qt::Key_Space);
  EXPECT_EQ(window.lesson_index(), last);
  EXPECT_GE(window.lesson_index(), 0);  // still on
  ASSERT_TRUE(settle_runs(window));
}

// Ending the lesson puts every tab back as the lesson found it: an opened scenario's state too.
TEST(ViewState, EndingTheLessonRestoresWhatWasOpen) {
  MainWindow window(true);
  ASSERT_TRUE(window.open_scenario(std::filesystem::path(ATTNRES_SCENARIOS_DIR) / "kimi-k3.toml"));
  ASSERT_TRUE(settle_runs(window));
  const nlohmann::json cost = window.view("cost")->state_json();
  const nlohmann::json pipeline = window.view("pipeline")->state_json();
  for (std::size_t i = 0; i < lesson_steps().size(); ++i) window.lesson_step(static_cast<int>(i));
  ASSERT_TRUE(settle_runs(window));
  EXPECT_NE(window.view("pipeline")->state_json(), pipeline);
  window.end_lesson();
  ASSERT_TRUE(settle_runs(window));
  EXPECT_EQ(window.view("cost")->state_json(), cost);
  EXPECT_EQ(window.view("pipeline")->state_json(), pipeline);
  EXPECT_NE(window.windowTitle().indexOf("kimi-k3.toml"), -1) << window.windowTitle().toStdString();
}

// The presentation callout is the first sentence of "look for", not cut at an abbreviation
// (step 8's "the paper's Fig. 6 losses").
TEST(ViewState, CalloutsAreNotCutAtAnAbbreviation) {
  MainWindow window(false);
  window.resize(1024, 768);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  window.set_presentation(true);
  int step = -1;
  for (std::size_t i = 0; i < lesson_steps().size(); ++i)
    if (lesson_steps()[i].look_for.find("Fig. 6") != std::string::npos) step = static_cast<int>(i);
  ASSERT_GE(step, 0);
  window.lesson_step(step);
  ASSERT_TRUE(settle_runs(window));
  window.lesson_step(step);  // the stage shows once the chart is there
  ASSERT_NE(window.stage(), nullptr);
  const QString callout = window.stage()->callout()->text();
  EXPECT_NE(callout.indexOf("Fig. 6 losses"), -1) << callout.toStdString();
  window.set_presentation(false);
  ASSERT_TRUE(settle_runs(window));  // no run left in flight when the window goes
}

// Ctrl+E (export) with the focus in a field: the field no longer takes it as "end of line", so
// the window's shortcut gets it (a ShortcutOverride the field does not accept).
TEST(ViewState, ExportShortcutPassesFieldsBy) {
  MainWindow window(true);
  auto* field = window.view("cost")->findChild<QLineEdit*>("block_sizes");
  ASSERT_NE(field, nullptr);
  QKeyEvent override_e(QEvent::ShortcutOverride, Qt::Key_E, Qt::ControlModifier, "e");
  QApplication::sendEvent(field, &override_e);
  EXPECT_FALSE(override_e.isAccepted());
  QKeyEvent override_a(QEvent::ShortcutOverride, Qt::Key_A, Qt::ControlModifier, "a");
  QApplication::sendEvent(field, &override_a);
  EXPECT_TRUE(override_a.isAccepted());  // select-all stays the field's
}

// A file that does not open says so in the tab's banner but leaves its charts as they were: they
// still show the tab's valid inputs.
TEST(ViewState, ABadFileDoesNotVeilValidCharts) {
  MainWindow window(true);
  window.recompute_all();
  ASSERT_TRUE(settle_runs(window));
  EXPECT_FALSE(window.open_scenario("/nonexistent/scenario.toml"));
  EXPECT_NE(window.error_text(), "");
  EXPECT_EQ(window.current_view()->stale_reason().toStdString(), "");
}

// A ▶ is greyed where its field is a loaded model's fact: the shipped Block model's own S and its
// learned queries; the random model takes them again (S where a scheme shown reads it).
TEST(ViewState, PlayButtonsFollowTheirFields) {
  MainWindow window(true);
  auto* choice = window.lesson().panel()->findChild<QComboBox*>("model_choice");
  ASSERT_NE(choice, nullptr);
  const int block = choice->findText("trained: Block AttnRes N = 4 (S = 2)");
  if (block < 0) GTEST_SKIP() << "the shipped models are not there (ATTNRES_MODELS_DIR)";
  choice->setCurrentIndex(block);
  ASSERT_TRUE(settle_runs(window));
  QWidget* s_play = window.lesson().block_player();
  QWidget* q_play = window.lesson().query_player();
  EXPECT_FALSE(window.lesson().block_size->isEnabled());
  EXPECT_FALSE(s_play->isEnabled());
  EXPECT_FALSE(q_play->isEnabled());
  window.lesson().back_to_random();
  ASSERT_TRUE(settle_runs(window));
  EXPECT_TRUE(q_play->isEnabled());
  // S's ▶ also needs a view that reads S: Depth attention on the Full model does once Block is
  // compared with it.
  EXPECT_FALSE(s_play->isEnabled());
  auto* compare = window.view("depth-attention")->findChild<QComboBox*>("compare");
  compare->setCurrentIndex(compare->findData(QString("block")));
  ASSERT_TRUE(settle_runs(window));
  EXPECT_TRUE(s_play->isEnabled());
}

// The view table is the one list: every view of the window is a row, in order, with the title
// its tab shows; --page takes the cost explorer's inner pages.
TEST(ViewState, TheViewTableIsTheWindowsList) {
  MainWindow window(true);
  const auto& table = view_table();
  ASSERT_EQ(window.views().size(), table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(window.views()[i]->name(), table[i].name);
    EXPECT_EQ(window.views()[i]->title().toStdString(), table[i].title);
  }
  const QString shot = QDir::temp().filePath("attnres-view-state-page.png");
  QProcess lab;
  lab.start(ATTNRES_GUI_BINARY, {"--view", "cost", "--page", "Memory", "--screenshot", shot});
  ASSERT_TRUE(lab.waitForFinished(120000));
  EXPECT_EQ(lab.exitCode(), 0) << lab.readAllStandardError().toStdString();
  lab.start(ATTNRES_GUI_BINARY, {"--view", "cost", "--page", "Nope", "--screenshot", shot});
  ASSERT_TRUE(lab.waitForFinished(120000));
  EXPECT_EQ(lab.exitCode(), 2);
  EXPECT_NE(lab.readAllStandardError().indexOf("'Decision'"), -1);
  // --dump-state opens no window: a window flag beside it is refused, not ignored.
  lab.start(ATTNRES_GUI_BINARY, {"--scenario", ATTNRES_SCENARIOS_DIR "/kimi-k3.toml",
                                 "--dump-state", shot + ".json", "--screenshot", shot});
  ASSERT_TRUE(lab.waitForFinished(120000));
  EXPECT_EQ(lab.exitCode(), 2);
  EXPECT_NE(lab.readAllStandardError().indexOf("--screenshot: not used with --dump-state"), -1);
  EXPECT_FALSE(QFile::exists(shot + ".json"));
  QFile::remove(shot);
}

}  // namespace test_view_state
}  // namespace attnres::gui

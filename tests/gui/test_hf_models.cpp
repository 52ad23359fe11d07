// The GUI on Hugging Face checkpoints in the Kimi K3 layout (docs/interop.md; the fixtures of
// tests/interop/fixtures, written by an independent NumPy script): File > Open model reads them
// off the GUI thread with progress and cancel, every model view works on them, and the Depth
// attention view's "routing statistics" page shows the core's routing_statistics of the trace its
// map shows.
#include <gtest/gtest.h>

#include <QApplication>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QProcess>
#include <QProgressBar>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableWidget>
#include <QTimer>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnres/atomic_file.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "attnres/routing_stats.hpp"
#include "gui_wait.hpp"
#include "lesson_model.hpp"
#include "main_window.hpp"
#include "model_support.hpp"
#include "test_support.hpp"
#include "widgets.hpp"

namespace attnres::gui {
namespace test_hf_models {

namespace fs = std::filesystem;
using OpenResult = MainWindow::OpenResult;

fs::path fixture(const std::string& name) {
  return fs::path(ATTNRES_SCENARIOS_DIR).parent_path() / "tests" / "interop" / "fixtures" / name;
}

// What an open ended with (the done callback of MainWindow::open_model).
struct Ended {
  int calls = 0;
  OpenResult result = OpenResult::cancelled;
  std::string error;
};

MainWindow::OpenModelOptions recording(const std::shared_ptr<Ended>& ended) {
  MainWindow::OpenModelOptions options;
  options.done = [ended](OpenResult result, const std::string& error) {
    ++ended->calls;
    ended->result = result;
    ended->error = error;
  };
  return options;
}

std::string model_choice(const MainWindow& window) {
  return window.findChild<QComboBox*>("model_choice")->currentText().toStdString();
}

// Opens `dir` in the background and waits until it is read and every view has recomputed.
void open_and_wait(MainWindow& window, const fs::path& dir) {
  auto ended = std::make_shared<Ended>();
  ASSERT_TRUE(window.open_model(dir, recording(ended)));
  ASSERT_TRUE(settle_runs(window));
  ASSERT_EQ(ended->calls, 1);
  ASSERT_EQ(ended->result, OpenResult::opened) << ended->error;
}

std::string byte_ids(const std::vector<int>& ids) {
  std::string text;
  for (int id : ids) {
    if (!text.empty()) text += ' ';
    text += std::to_string(id);
  }
  return text;
}

// A number of the routing table (its full value) or NaN for "-".
double cell(const QTableWidget* table, int row, int col) {
  const QTableWidgetItem* item = table->item(row, col);
  if (item == nullptr) return -12345.0;
  return item->data(Qt::UserRole).toDouble();
}

void expect_same(double shown, double expected, const std::string& what) {
  if (std::isnan(expected)) {
    EXPECT_TRUE(std::isnan(shown)) << what << ": " << shown;
  } else {
    // The core's f64 statistics (or NumPy's float64, the same arithmetic in another order): the
    // reordering bound, relative to 1, the scale of depth weights (effective sources >= 1 to
    // their own).
    EXPECT_TRUE(test::near_relative(shown, expected, test::kReorderedBound<double>, 1.0, what));
  }
}

// The routing table holds `expected`, row for row.
void expect_table(const QTableWidget* table, const std::vector<ReadRouting>& expected) {
  ASSERT_EQ(table->rowCount(), static_cast<int>(expected.size()));
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const ReadRouting& r = expected[i];
    const int row = static_cast<int>(i);
    const std::string at = "read " + std::to_string(i);
    EXPECT_EQ(cell(table, row, 0), r.read) << at;
    EXPECT_EQ(table->item(row, 1)->text().toStdString(), r.target) << at;
    EXPECT_EQ(cell(table, row, 2), static_cast<double>(r.sources.size())) << at;
    expect_same(cell(table, row, 3), r.normalised_entropy, at + " entropy");
    expect_same(cell(table, row, 4), r.effective_sources, at + " effective sources");
    expect_same(cell(table, row, 5), r.top1_mass, at + " top-1");
    expect_same(cell(table, row, 6), r.embedding_weight, at + " embedding");
    expect_same(cell(table, row, 7), r.recent_weight, at + " recent");
  }
}

QTableWidget* routing_table(MainWindow& window) {
  return window.view("depth-attention")->findChild<QTableWidget*>("routing_table");
}

// Every model view (and Training, which trains its own models) shows no error, on every page of
// Depth attention, with the model's own scheme and compared with two others.
void expect_every_view_works(MainWindow& window, const std::string& model) {
  for (const char* name : {"depth-attention", "magnitudes", "duality", "training"}) {
    SCOPED_TRACE(model + ": " + name);
    window.show_view(name);
    ASSERT_TRUE(settle_runs(window));
    EXPECT_EQ(window.view(name)->error_text(), "");
    auto* compare = window.view(name)->findChild<QComboBox*>("compare");
    if (compare == nullptr) continue;  // Training
    for (const char* other : {"full", "standard", "@none"}) {
      compare->setCurrentIndex(compare->findData(QString(other)));
      ASSERT_TRUE(settle_runs(window));
      EXPECT_EQ(window.view(name)->error_text(), "") << other;
    }
  }
  auto* pages = window.view("depth-attention")->findChild<QTabWidget*>("depth_pages");
  ASSERT_NE(pages, nullptr);
  window.show_view("depth-attention");
  for (int i = 0; i < pages->count(); ++i) {
    pages->setCurrentIndex(i);
    ASSERT_TRUE(settle_runs(window));
    EXPECT_EQ(window.view("depth-attention")->error_text(), "")
        << model << ": " << pages->tabText(i).toStdString();
  }
  pages->setCurrentIndex(0);
}

TEST(HfModels, AShardedQwen3CheckpointOpensInTheBackgroundAndShowsItsRouting) {
  MainWindow window(false);
  window.recompute_all();
  ASSERT_TRUE(settle_runs(window));
  const std::string before = model_choice(window);
  const fs::path dir = fixture("k3_qwen3_bf16_sharded");
  auto ended = std::make_shared<Ended>();
  auto options = recording(ended);
  // The read runs off the GUI thread: its first progress report waits for the GUI thread's event
  // loop to run a timer (a read on the GUI thread would wait in vain for 30 s).
  auto loop_ran = std::make_shared<std::promise<void>>();
  auto seen = std::make_shared<std::atomic<bool>>(false);
  options.check = [waited = loop_ran->get_future().share(), seen](std::size_t, std::size_t) {
    if (!*seen) *seen = waited.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
    return true;
  };
  QTimer::singleShot(0, [loop_ran] { loop_ran->set_value(); });
  ASSERT_TRUE(window.open_model(dir, options));
  // The call returned with the progress bar up and the model not yet changed (its result is
  // applied on the GUI thread, in a later event-loop pass).
  EXPECT_GE(window.runs_in_flight(), 1u);
  EXPECT_TRUE(window.findChild<QProgressBar*>()->isVisibleTo(&window));
  EXPECT_EQ(model_choice(window), before);
  EXPECT_EQ(ended->calls, 0);
  ASSERT_TRUE(settle_runs(window));
  ASSERT_EQ(ended->calls, 1);
  ASSERT_EQ(ended->result, OpenResult::opened) << ended->error;
  EXPECT_TRUE(*seen);
  EXPECT_EQ(model_choice(window), "loaded: " + dir.string());
  EXPECT_FALSE(window.findChild<QProgressBar*>()->isVisibleTo(&window));

  // What was read: the K3 layout, over three shards, BF16.
  const OpenedModel* opened = window.lesson().opened();
  ASSERT_NE(opened, nullptr);
  EXPECT_EQ(opened->checkpoint.layout, CheckpointLayout::k3);
  EXPECT_TRUE(opened->checkpoint.sharded);
  EXPECT_EQ(opened->checkpoint.files.size(), 3u);
  ASSERT_EQ(opened->checkpoint.dtypes.size(), 1u);
  EXPECT_EQ(opened->checkpoint.dtypes.begin()->first, "BF16");

  // The model's own scheme: Block AttnRes with S = 4 sublayers (2 decoder layers per block).
  View* depth = window.view("depth-attention");
  EXPECT_EQ(depth->findChild<QComboBox*>("scheme")->currentText(),
            "model's own: Block AttnRes (S = 4)");
  EXPECT_EQ(window.lesson().block_size->value(), 4);
  ASSERT_EQ(depth->heatmaps().size(), 1u);
  EXPECT_EQ(depth->heatmaps()[0]->title(),
            "loaded Block AttnRes (S = 4): alpha (mean over tokens)");

  // The routing page: routing_statistics of a core forward pass of the same model and tokens.
  const ModelWeights<double> model = load_model(dir);
  const std::vector<int> tokens = window.lesson().snapshot().token_ids(model.config);
  const ForwardTrace trace = forward(model, tokens).trace;
  QTableWidget* table = routing_table(window);
  ASSERT_NE(table, nullptr);
  expect_table(table, routing_statistics(trace));
  const auto* origin = depth->findChild<QLabel*>("routing_checkpoint");
  ASSERT_NE(origin, nullptr);
  for (const char* part : {"Kimi K3 Hugging Face layout", "sharded over 3 files", "BF16 tensors"})
    EXPECT_TRUE(origin->text().contains(part)) << origin->text().toStdString();
  // Its chart and cosine map are the core's, and they are what the page exports.
  auto* pages = depth->findChild<QTabWidget*>("depth_pages");
  window.show_view("depth-attention");
  pages->setCurrentIndex(pages->count() - 1);
  EXPECT_EQ(pages->tabText(pages->currentIndex()), "routing statistics");
  ASSERT_EQ(depth->charts().size(), 1u);
  EXPECT_EQ(depth->charts()[0].id, "routing_by_read");
  ASSERT_EQ(depth->heatmaps().size(), 1u);
  const HeatmapSpec& map = depth->heatmaps()[0]->spec();
  EXPECT_EQ(map.id, "query_cosines");
  const Eigen::MatrixXd cosines = row_cosines(effective_queries(model));
  ASSERT_EQ(map.values.size(), static_cast<std::size_t>(cosines.rows()));
  for (Eigen::Index r = 0; r < cosines.rows(); ++r) {
    for (Eigen::Index c = 0; c < cosines.cols(); ++c)
      EXPECT_TRUE(test::near_relative(map.values[std::size_t(r)][std::size_t(c)], cosines(r, c),
                                      test::kReorderedBound<double>, 1.0, "cosine"));
  }

  // The fixture's own tokens: the table holds what the NumPy reference wrote in stats.json.
  const auto case_json = nlohmann::json::parse(read_file(dir / "case.json"));
  const auto stats = nlohmann::json::parse(read_file(dir / "stats.json"));
  window.lesson().tokens->setText(
      QString::fromStdString(byte_ids(case_json["tokens"].get<std::vector<int>>())));
  emit window.lesson().tokens->editingFinished();
  ASSERT_TRUE(settle_runs(window));
  const auto& reads = stats["reads"];
  ASSERT_EQ(table->rowCount(), static_cast<int>(reads.size()));
  const auto number = [](const nlohmann::json& v) {
    return v.is_null() ? std::nan("") : v.get<double>();
  };
  for (std::size_t i = 0; i < reads.size(); ++i) {
    const int row = static_cast<int>(i);
    const std::string at = "stats.json read " + std::to_string(i);
    EXPECT_EQ(cell(table, row, 0), reads[i]["read"].get<double>()) << at;
    EXPECT_EQ(cell(table, row, 2), reads[i]["n_sources"].get<double>()) << at;
    expect_same(cell(table, row, 3), number(reads[i]["normalised_entropy"]), at + " entropy");
    expect_same(cell(table, row, 4), number(reads[i]["effective_sources"]), at + " effective");
    expect_same(cell(table, row, 5), number(reads[i]["top1_mass"]), at + " top-1");
    expect_same(cell(table, row, 6), number(reads[i]["embedding_weight"]), at + " embedding");
    expect_same(cell(table, row, 7), number(reads[i]["recent_weight"]), at + " recent");
  }
  EXPECT_EQ(window.error_text(), "");
}

// Depth attention, Magnitudes, Duality and Training on the sharded Qwen3 BF16 model (q/k norms,
// tied embeddings) and the Llama F32 one (the last block incomplete): no error anywhere, and the
// map shows each model's own Block scheme.
TEST(HfModels, EveryModelViewWorksOnK3Checkpoints) {
  MainWindow window(false);
  window.recompute_all();
  for (const char* name : {"k3_qwen3_bf16_sharded", "k3_llama_f32"}) {
    SCOPED_TRACE(name);
    open_and_wait(window, fixture(name));
    EXPECT_EQ(window.view("depth-attention")->findChild<QComboBox*>("scheme")->currentText(),
              "model's own: Block AttnRes (S = 4)");
    const ModelWeights<double> model = load_model(fixture(name));
    const auto maps = window.view("depth-attention")->heatmaps();
    ASSERT_EQ(maps.size(), 1u);
    EXPECT_EQ(maps[0]->values().size(), static_cast<std::size_t>(model.config.sublayers() + 1));
    expect_every_view_works(window, name);
  }
  // The standard residual in the K3 layout (attn_res_block_size null): no depth reads, said so.
  open_and_wait(window, fixture("llama_standard_bf16"));
  expect_every_view_works(window, "llama_standard_bf16");
  const auto* note = window.view("depth-attention")->findChild<QLabel*>("routing_note");
  ASSERT_NE(note, nullptr);
  EXPECT_TRUE(note->text().contains("no depth reads")) << note->text().toStdString();
  EXPECT_EQ(routing_table(window)->rowCount(), 0);
}

// A cancelled read changes nothing and shows no error: cancelled from the read's first progress
// report, by the Cancel button, or replaced by a newer open.
TEST(HfModels, ACancelledLoadChangesNothing) {
  MainWindow window(false);
  window.recompute_all();
  ASSERT_TRUE(settle_runs(window));
  open_and_wait(window, fixture("k3_llama_f32"));
  const OpenedModel* previous = window.lesson().opened();
  const std::string choice = model_choice(window);
  const QString about = window.lesson().about->text();
  const int reads = window.lesson().directory_reads();
  window.show_view("depth-attention");
  const auto check_unchanged = [&](const std::string& how) {
    SCOPED_TRACE(how);
    EXPECT_EQ(window.lesson().opened(), previous);
    EXPECT_EQ(model_choice(window), choice);
    EXPECT_EQ(window.lesson().about->text(), about);
    EXPECT_EQ(window.error_text(), "");
    EXPECT_EQ(window.current_view()->stale_reason(), "");
    EXPECT_FALSE(window.findChild<QProgressBar*>()->isVisibleTo(&window));
  };

  // From the progress callback, on its first call.
  auto ended = std::make_shared<Ended>();
  auto options = recording(ended);
  auto checks = std::make_shared<int>(0);
  options.check = [checks](std::size_t, std::size_t) {
    ++*checks;
    return false;
  };
  ASSERT_TRUE(window.open_model(fixture("k3_qwen3_bf16_sharded"), options));
  ASSERT_TRUE(settle_runs(window));
  EXPECT_EQ(*checks, 1);
  EXPECT_EQ(ended->calls, 1);
  EXPECT_EQ(ended->result, OpenResult::cancelled);
  check_unchanged("from the progress callback");

  // The Cancel button, pressed before the read's result is seen.
  ended = std::make_shared<Ended>();
  ASSERT_TRUE(window.open_model(fixture("k3_qwen3_bf16_sharded"), recording(ended)));
  window.cancel_background();
  ASSERT_TRUE(settle_runs(window));
  EXPECT_EQ(ended->calls, 1);
  EXPECT_EQ(ended->result, OpenResult::cancelled);
  check_unchanged("by the Cancel button");

  // A synchronous window cancels the same way.
  {
    MainWindow inline_window(true);
    const std::string inline_choice = model_choice(inline_window);
    auto inline_ended = std::make_shared<Ended>();
    auto inline_options = recording(inline_ended);
    inline_options.check = [](std::size_t, std::size_t) { return false; };
    EXPECT_FALSE(inline_window.open_model(fixture("k3_qwen3_bf16_sharded"), inline_options));
    EXPECT_EQ(inline_ended->result, OpenResult::cancelled);
    EXPECT_EQ(model_choice(inline_window), inline_choice);
    EXPECT_EQ(inline_window.error_text(), "");
  }

  // A newer open replaces one in flight: the first ends cancelled, the second opens.
  auto first = std::make_shared<Ended>();
  auto second = std::make_shared<Ended>();
  ASSERT_TRUE(window.open_model(fixture("k3_qwen3_bf16_sharded"), recording(first)));
  ASSERT_TRUE(window.open_model(fixture("k3_llama_b1_f16"), recording(second)));
  ASSERT_TRUE(settle_runs(window));
  EXPECT_EQ(first->calls, 1);
  EXPECT_EQ(first->result, OpenResult::cancelled);
  EXPECT_EQ(second->calls, 1);
  EXPECT_EQ(second->result, OpenResult::opened) << second->error;
  EXPECT_EQ(model_choice(window), "loaded: " + fixture("k3_llama_b1_f16").string());
  EXPECT_EQ(window.lesson().directory_reads(), reads + 4);
  EXPECT_EQ(window.error_text(), "");
}

// A checkpoint whose shard index is cut short shows the loader's message, naming the index file,
// and the previous model stays; choosing the "loaded" entry again reads it in the background too.
TEST(HfModels, ABrokenCheckpointShowsItsErrorAndKeepsThePreviousModel) {
  test::TempDir temp;
  const fs::path broken = temp / "broken";
  fs::copy(fixture("k3_qwen3_bf16_sharded"), broken);
  const std::string index = read_file(broken / "model.safetensors.index.json");
  write_file_atomically(broken / "model.safetensors.index.json", index.substr(0, index.size() / 2));

  MainWindow window(false);
  window.recompute_all();
  open_and_wait(window, fixture("k3_llama_f32"));
  const OpenedModel* previous = window.lesson().opened();
  window.show_view("depth-attention");
  auto ended = std::make_shared<Ended>();
  ASSERT_TRUE(window.open_model(broken, recording(ended)));
  ASSERT_TRUE(settle_runs(window));
  ASSERT_EQ(ended->calls, 1);
  EXPECT_EQ(ended->result, OpenResult::failed);
  EXPECT_NE(ended->error.find("model.safetensors.index.json"), std::string::npos) << ended->error;
  // The banner shows the same message; the lesson model still has the previous model.
  EXPECT_NE(window.error_text().find(ended->error), std::string::npos) << window.error_text();
  EXPECT_EQ(window.lesson().opened(), previous);
  EXPECT_EQ(model_choice(window), "loaded: " + fixture("k3_llama_f32").string());
  // The GUI keeps working on it.
  window.lesson().tokens->setText("1 2 3 4");
  emit window.lesson().tokens->editingFinished();
  ASSERT_TRUE(settle_runs(window));
  EXPECT_EQ(routing_table(window)->rowCount(), 7);  // L + 1 reads of 3 layers
  EXPECT_EQ(window.view("magnitudes")->error_text(), "");

  // Back to random, then the "loaded" entry again: read again off the GUI thread, then shown.
  auto* combo = window.findChild<QComboBox*>("model_choice");
  window.lesson().back_to_random();
  ASSERT_TRUE(settle_runs(window));
  EXPECT_EQ(window.lesson().opened(), nullptr);
  const int reads = window.lesson().directory_reads();
  combo->setCurrentIndex(
      combo->findText(QString::fromStdString("loaded: " + fixture("k3_llama_f32").string())));
  EXPECT_EQ(window.lesson().opened(), nullptr);  // not yet: it is being read
  ASSERT_TRUE(settle_runs(window));
  EXPECT_EQ(window.lesson().directory_reads(), reads + 1);
  ASSERT_NE(window.lesson().opened(), nullptr);
  EXPECT_EQ(window.lesson().opened()->directory, fixture("k3_llama_f32").string());
  EXPECT_EQ(model_choice(window), "loaded: " + fixture("k3_llama_f32").string());
  EXPECT_EQ(window.error_text(), "");
}

// The command line: --model opens a K3 checkpoint and --page shows the routing page in a
// screenshot; an unknown page is refused with the view's pages.
TEST(HfModels, TheCommandLineShowsTheRoutingPageOfAK3Model) {
  test::TempDir temp;
  const auto run = [](const QStringList& arguments) {
    QProcess process;
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert("QT_QPA_PLATFORM", "offscreen");
    process.setProcessEnvironment(environment);
    process.start(ATTNRES_GUI_BINARY, arguments);
    EXPECT_TRUE(process.waitForFinished(120000));
    return std::make_pair(process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1,
                          QString::fromUtf8(process.readAllStandardError()));
  };
  const QString model = QString::fromStdString(fixture("k3_qwen3_bf16_sharded").string());
  const QString png = QString::fromStdString((temp / "routing.png").string());
  const auto [code, error] = run({"--view", "depth-attention", "--model", model, "--page",
                                  "routing statistics", "--screenshot", png});
  EXPECT_EQ(code, 0) << error.toStdString();
  EXPECT_GT(fs::file_size(temp / "routing.png"), 10000u);
  const auto [bad_code, bad_error] =
      run({"--view", "depth-attention", "--page", "nope", "--screenshot", png});
  EXPECT_EQ(bad_code, 2);
  EXPECT_TRUE(bad_error.contains("--page: the depth-attention view has no page 'nope'"))
      << bad_error.toStdString();
  EXPECT_TRUE(bad_error.contains("'routing statistics'")) << bad_error.toStdString();
}

}  // namespace test_hf_models
}  // namespace attnres::gui

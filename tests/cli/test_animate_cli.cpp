// attnres animate: the depth-attention map animated for slides. Every frame's numbers (frames.json)
// are the static view at the same setting, recomputed here with the reference forward pass and the
// core's alpha_heatmap (the GUI's Depth attention view): the random lesson model drawn at each
// query std, a loaded model's queries scaled, Block AttnRes at each S on the same weights. The
// files exist, the PNGs and the GIF decode (Qt's decoder, not giflib) with the frames' size and
// count, bad flags are located errors that leave no directory, and Ctrl-C in the write phase
// leaves nothing.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <QImageReader>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "attnres/atomic_file.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "attnres/model_charts.hpp"
#include "cli/cli_support.hpp"
#include "gif_export.hpp"
#include "model_support.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_animate_cli {

namespace fs = std::filesystem;
using test::run_cli;

const std::vector<int> kLessonTokens = {1, 7, 42, 7, 99, 3};

// The GUI's random lesson model (app/gui/lesson_model.cpp), written out here on purpose.
ModelConfig lesson_config() {
  ModelConfig config;
  config.num_hidden_layers = 4;
  config.hidden_size = 64;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.intermediate_size = 172;
  config.vocab_size = 256;
  config.attn_res.mode = ResidualMode::full;
  return config;
}

nlohmann::json frames_json(const fs::path& dir) {
  return nlohmann::json::parse(read_file(dir / "frames.json"));
}

// The CLI's maps against the core's: the same arithmetic, in another process (and for Block at
// S = 1 against Full, another order): the reordering bound, relative to 1, the scale of depth
// weights (docs/testing.md §2). JSON carries doubles exactly.
constexpr double kSameArithmetic = test::kReorderedBound<double>;

// frames.json's heatmap of a frame against the core's map: the same labels, and every value
// within kSameArithmetic (null where the core has NaN: not a source).
void expect_same_map(const nlohmann::json& json, const HeatmapSpec& expected,
                     const std::string& where) {
  EXPECT_EQ(json["row_labels"].get<std::vector<std::string>>(), expected.row_labels) << where;
  EXPECT_EQ(json["column_labels"].get<std::vector<std::string>>(), expected.column_labels) << where;
  ASSERT_EQ(json["values"].size(), expected.values.size()) << where;
  for (std::size_t r = 0; r < expected.values.size(); ++r) {
    ASSERT_EQ(json["values"][r].size(), expected.values[r].size()) << where << " row " << r;
    for (std::size_t c = 0; c < expected.values[r].size(); ++c) {
      const nlohmann::json& cell = json["values"][r][c];
      if (std::isnan(expected.values[r][c])) {
        EXPECT_TRUE(cell.is_null()) << where << " (" << r << ", " << c << ")";
      } else {
        ASSERT_TRUE(cell.is_number()) << where << " (" << r << ", " << c << ")";
        EXPECT_TRUE(
            test::near_relative(cell.get<double>(), expected.values[r][c], kSameArithmetic, 1.0))
            << where << " (" << r << ", " << c << ")";
      }
    }
  }
  EXPECT_TRUE(test::near_relative(json["low"].get<double>(), expected.low, kSameArithmetic, 1.0))
      << where;
  EXPECT_TRUE(test::near_relative(json["high"].get<double>(), expected.high, kSameArithmetic, 1.0))
      << where;
}

// The values only (Block at S = 1 against Full: the same numbers under other labels).
void expect_same_values(const nlohmann::json& json, const HeatmapSpec& expected,
                        const std::string& where) {
  ASSERT_EQ(json["values"].size(), expected.values.size()) << where;
  for (std::size_t r = 0; r < expected.values.size(); ++r) {
    ASSERT_EQ(json["values"][r].size(), expected.values[r].size()) << where;
    for (std::size_t c = 0; c < expected.values[r].size(); ++c) {
      const nlohmann::json& cell = json["values"][r][c];
      if (std::isnan(expected.values[r][c])) {
        EXPECT_TRUE(cell.is_null()) << where;
      } else {
        EXPECT_TRUE(
            test::near_relative(cell.get<double>(), expected.values[r][c], kSameArithmetic, 1.0))
            << where;
      }
    }
  }
}

HeatmapSpec core_map(const ModelWeights<double>& model, const std::vector<int>& tokens,
                     const ForwardOptions& options = {}) {
  return alpha_heatmap(forward(model, tokens, options).trace, "");
}

// Every frame's PNG and SVG exist, the PNG decodes at 720 x 600 and is not blank; index.md links
// them; the GIF (when this build writes one) has one frame per PNG, of their size, and its first
// frame shows the first PNG.
void expect_frame_files(const fs::path& dir, const nlohmann::json& json) {
  const std::string index = read_file(dir / "index.md");
  const auto& frames = json["frames"];
  for (std::size_t k = 0; k < frames.size(); ++k) {
    const std::string png = frames[k]["png"], svg = frames[k]["svg"];
    char stem[16];
    std::snprintf(stem, sizeof stem, "frame_%03zu", k);
    EXPECT_EQ(png, std::string(stem) + ".png");
    EXPECT_EQ(svg, std::string(stem) + ".svg");
    const QImage image(QString::fromStdString((dir / png).string()));
    ASSERT_FALSE(image.isNull()) << png;
    EXPECT_EQ(image.size(), QSize(720, 600)) << png;
    test::expect_non_blank_png(dir / png);
    EXPECT_NE(read_file(dir / svg).find("<svg"), std::string::npos) << svg;
    EXPECT_NE(index.find("(" + png + ")"), std::string::npos) << png;
    EXPECT_NE(index.find("(" + svg + ")"), std::string::npos) << svg;
  }
  EXPECT_EQ(json["width_pixels"], 720);
  EXPECT_EQ(json["height_pixels"], 600);
  if (!charts::gif_supported()) {
    EXPECT_TRUE(json["animation"].is_null());
    EXPECT_FALSE(fs::exists(dir / "animation.gif"));
    return;
  }
  ASSERT_EQ(json["animation"], "animation.gif");
  EXPECT_NE(index.find("![animation](animation.gif)"), std::string::npos);
  QImageReader reader(QString::fromStdString((dir / "animation.gif").string()), "gif");
  ASSERT_TRUE(reader.canRead()) << reader.errorString().toStdString();
  EXPECT_TRUE(reader.supportsAnimation());
  EXPECT_EQ(reader.loopCount(), -1);  // loops forever
  int count = 0;
  QImage first;
  while (reader.canRead()) {
    const QImage frame = reader.read();
    if (frame.isNull()) break;
    EXPECT_EQ(frame.size(), QSize(720, 600)) << "GIF frame " << count;
    EXPECT_EQ(reader.nextImageDelay(), 500) << "GIF frame " << count;
    if (count == 0) first = frame.convertToFormat(QImage::Format_RGB32);
    ++count;
  }
  EXPECT_EQ(count, static_cast<int>(frames.size()));
  // The first frame: the PNG's own colours where it has at most 256 (exact palette), else
  // giflib's 256 (median cut): every pixel within a small distance.
  const QImage png = QImage(QString::fromStdString((dir / "frame_000.png").string()))
                         .convertToFormat(QImage::Format_RGB32);
  ASSERT_EQ(first.size(), png.size());
  int worst = 0;
  std::set<QRgb> colours;
  for (int y = 0; y < png.height(); ++y) {
    for (int x = 0; x < png.width(); ++x) {
      const QRgb a = png.pixel(x, y), b = first.pixel(x, y);
      colours.insert(a);
      worst = std::max({worst, std::abs(qRed(a) - qRed(b)), std::abs(qGreen(a) - qGreen(b)),
                        std::abs(qBlue(a) - qBlue(b))});
    }
  }
  EXPECT_LE(worst, colours.size() <= 256 ? 0 : 24) << colours.size() << " colours";
}

TEST(AnimateCli, QueryStdFramesAreTheRandomLessonModelsViewAtEachStd) {
  test::TempDir dir;
  const fs::path out = dir / "anim";
  const auto run =
      run_cli({"animate", "--sweep", "query-std", "--frames", "5", "--out", out.string()});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("wrote " + out.string() + ": 5 frames frame_000 .. frame_004"),
            std::string::npos)
      << run.out;
  const nlohmann::json json = frames_json(out);
  EXPECT_EQ(json["schema"]["name"], "attnres.animate");
  EXPECT_EQ(json["inputs"]["sweep"], "query-std");
  EXPECT_EQ(json["inputs"]["tokens"].get<std::vector<int>>(), kLessonTokens);
  EXPECT_EQ(json["inputs"]["random_model"]["seed"], 1);
  EXPECT_EQ(json["sublayers"], 8);
  ASSERT_EQ(json["frames"].size(), 5u);
  for (std::size_t k = 0; k < 5; ++k) {
    const auto& frame = json["frames"][k];
    const double sigma = frame["query_std"].get<double>();
    // 0 .. 2 evenly: from + k (to - from) / (frames - 1), 3 roundings of values up to 2: 4 u of 2.
    EXPECT_TRUE(test::near_relative(sigma, 0.5 * static_cast<double>(k), test::roundoffs<double>(4),
                                    2.0, "query std"));
    EXPECT_TRUE(frame["block_size"].is_null());
    // The static view at that setting: the random model drawn with that query std.
    const ModelWeights<double> model =
        random_model(lesson_config(), {.seed = 1, .weight_std = 0.02, .query_std = sigma});
    expect_same_map(frame["heatmap"], core_map(model, kLessonTokens), "frame " + std::to_string(k));
  }
  // Frame 0 (query std 0): every read is the plain mean of its r + 1 sources.
  const auto& uniform = json["frames"][0]["heatmap"]["values"];
  for (std::size_t r = 0; r < uniform.size(); ++r) {
    const std::size_t sources = r + 1;  // read r sees v_0 .. v_r (the final read all L + 1)
    for (std::size_t c = 0; c < uniform[r].size(); ++c) {
      if (c < sources) {
        // exp(0) / n: 1 / n rounded once on each side; 4 u.
        EXPECT_TRUE(test::near_relative(uniform[r][c].get<double>(),
                                        1.0 / static_cast<double>(sources),
                                        test::roundoffs<double>(4)));
      } else {
        EXPECT_TRUE(uniform[r][c].is_null());
      }
    }
  }
  // The last frame (query std 2) is selective: some later read puts most of its weight on one
  // source.
  double sharpest = 0.0;
  const auto& sharp = json["frames"][4]["heatmap"]["values"];
  for (std::size_t r = 2; r < sharp.size(); ++r) {
    for (const auto& cell : sharp[r]) {
      if (cell.is_number()) sharpest = std::max(sharpest, cell.get<double>());
    }
  }
  EXPECT_GT(sharpest, 0.8);
  expect_frame_files(out, json);
}

TEST(AnimateCli, BlockSizeFramesAreBlockAttnResAtEachSOnTheSameWeights) {
  test::TempDir dir;
  const fs::path out = dir / "anim";
  const auto run = run_cli({"animate", "--sweep", "block-size", "--out", out.string()});
  ASSERT_EQ(run.status, 0) << run.err;
  const nlohmann::json json = frames_json(out);
  const int L = 8;
  ASSERT_EQ(json["frames"].size(), static_cast<std::size_t>(L));  // every S = 1 .. L
  const ModelWeights<double> model =
      random_model(lesson_config(), {.seed = 1, .weight_std = 0.02, .query_std = 0.5});
  for (int S = 1; S <= L; ++S) {
    const auto& frame = json["frames"][static_cast<std::size_t>(S - 1)];
    EXPECT_EQ(frame["block_size"], S);
    EXPECT_EQ(frame["blocks"], (L + S - 1) / S);
    ForwardOptions block;
    block.mode = ResidualMode::block;
    block.block_size = S;
    expect_same_map(frame["heatmap"], core_map(model, kLessonTokens, block),
                    "S = " + std::to_string(S));
  }
  // The GUI's way to the same map ("compare with" Block: the weights converted) at S = 3.
  AttnResConfig three;
  three.mode = ResidualMode::block;
  three.block_size = 3;
  expect_same_map(json["frames"][2]["heatmap"],
                  core_map(convert_scheme(model, three), kLessonTokens), "converted S = 3");
  // S = 1 is Full AttnRes: the same numbers (labelled b1.. instead of v1..).
  expect_same_values(json["frames"][0]["heatmap"], core_map(model, kLessonTokens), "S = 1");
  // S = L: one block; the columns are the embedding, that block (final read) and the partial sum.
  EXPECT_EQ(json["frames"][L - 1]["heatmap"]["column_labels"].get<std::vector<std::string>>(),
            (std::vector<std::string>{"emb", "b1", "partial"}));
  expect_frame_files(out, json);
}

// The RMS of every pseudo-query of a model, from the tensor table (independent of the CLI's), and
// how many elements it is of.
double queries_rms(const ModelWeights<double>& model, std::int64_t* elements = nullptr) {
  double sum = 0.0;
  std::int64_t count = 0;
  for_each_tensor(model, [&](const TensorView& tensor) {
    if (tensor.name.size() < 6 || tensor.name.compare(tensor.name.size() - 6, 6, ".query") != 0)
      return;
    for (std::int64_t i = 0; i < tensor.element_count(); ++i)
      sum += tensor.data[i] * tensor.data[i];
    count += tensor.element_count();
  });
  if (elements) *elements = count;
  return std::sqrt(sum / static_cast<double>(count));
}

TEST(AnimateCli, ALoadedModelsQueriesAreScaledToEachStd) {
  test::TempDir dir;
  const fs::path model_dir = dir / "full";
  ASSERT_EQ(run_cli({"init-model", "--layers", "2", "--d-model", "16", "--heads", "4", "--ffn",
                     "24", "--vocab", "20", "--mode", "full", "--query-std", "0.8", "--seed", "4",
                     "--out", model_dir.string()})
                .status,
            0);
  const fs::path out = dir / "anim";
  const auto run =
      run_cli({"animate", "--sweep", "query-std", "--model", model_dir.string(), "--tokens",
               "1 7 12 5", "--frames", "3", "--from", "0.5", "--to", "1.5", "--out", out.string()});
  ASSERT_EQ(run.status, 0) << run.err;
  const nlohmann::json json = frames_json(out);
  EXPECT_EQ(json["inputs"]["model"], model_dir.string());
  EXPECT_TRUE(json["inputs"]["random_model"].is_null());
  EXPECT_NE(json["queries"].get<std::string>().find("scaled"), std::string::npos);
  const ModelWeights<double> model = load_model(model_dir);
  std::int64_t elements = 0;
  const double rms = queries_rms(model, &elements);
  ASSERT_GT(rms, 0.0);
  // Two RMS over n query elements (n - 1 additions of squares each, halved by the root) and the
  // scaling's 2 roundings per element: (n + 6) u; (n + 8) u.
  const double rms_bound = test::roundoffs<double>(static_cast<double>(elements) + 8);
  for (std::size_t k = 0; k < 3; ++k) {
    const double sigma = 0.5 + 0.5 * static_cast<double>(k);
    // from + k (to - from) / (frames - 1): 3 roundings of values up to 1.5; 4 u of it.
    EXPECT_TRUE(test::near_relative(json["frames"][k]["query_std"].get<double>(), sigma,
                                    test::roundoffs<double>(4), 1.5, "query std"));
    ModelWeights<double> scaled = model;
    visit_tensors(scaled, [&](const TensorRef<double>& tensor) {
      if (tensor.name.ends_with(".query")) {
        for (std::int64_t i = 0; i < tensor.element_count(); ++i) tensor.data[i] *= sigma / rms;
      }
    });
    EXPECT_TRUE(test::near_relative(queries_rms(scaled), sigma, rms_bound, 0.0, "scaled rms"));
    expect_same_map(json["frames"][k]["heatmap"], core_map(scaled, {1, 7, 12, 5}),
                    "frame " + std::to_string(k));
  }

  // Block sizes on a loaded Block model: its own S is one of the frames.
  const std::string block_model = test::make_block_test_model(dir.path(), 2);
  const fs::path blocks = dir / "blocks";
  ASSERT_EQ(run_cli({"animate", "--sweep", "block-size", "--model", block_model, "--tokens",
                     "1 7 12 5", "--out", blocks.string()})
                .status,
            0);
  const nlohmann::json block_json = frames_json(blocks);
  ASSERT_EQ(block_json["frames"].size(), 4u);  // L = 4
  expect_same_map(block_json["frames"][1]["heatmap"],
                  core_map(load_model(block_model), {1, 7, 12, 5}), "its own S = 2");
}

struct BadRun {
  std::vector<std::string> args;
  int status;
  std::string message;
};

TEST(AnimateCli, BadFlagsAreLocatedAndLeaveNoDirectory) {
  test::TempDir dir;
  const std::string standard = (dir / "standard").string(), zero = (dir / "zero").string();
  for (const auto& [path, extra] : {std::pair{standard, std::vector<std::string>{}},
                                    std::pair{zero, std::vector<std::string>{"--mode", "full"}}}) {
    std::vector<std::string> args = {"init-model", "--layers", "1",     "--d-model", "16",
                                     "--heads",    "2",        "--ffn", "16",        "--vocab",
                                     "256",        "--out",    path};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_EQ(run_cli(args).status, 0);
  }
  const std::string out = (dir / "anim").string();
  const std::vector<BadRun> runs = {
      {{"--sweep", "sideways"}, 2, "--sweep must be query-std or block-size, got 'sideways'"},
      {{"--sweep", "query-std", "--frames", "1"}, 2, "--frames must be 2 .. 128, got 1"},
      {{"--sweep", "query-std", "--frames", "500"}, 2, "--frames must be 2 .. 128, got 500"},
      {{"--sweep", "block-size", "--frames", "5"}, 2, "--frames applies to --sweep query-std"},
      {{"--sweep", "query-std", "--from", "2", "--to", "1"}, 2, "0 <= --from < --to <= 10"},
      {{"--sweep", "query-std", "--query-std", "1"}, 2, "--query-std sets the random model"},
      {{"--sweep", "block-size", "--model", standard, "--seed", "2"}, 2, "--seed shapes"},
      {{"--sweep", "block-size", "--layers", "0"}, 2, "--layers must be 1 .. 64, got 0"},
      {{"--sweep", "block-size", "--delay-ms", "5"}, 2, "--delay-ms must be 20 .. 10000"},
      {{"--sweep", "block-size", "--tokens", "1 300"}, 2, "--tokens: '300' (token 1)"},
      {{"--sweep", "block-size", "--colour", "red"}, 2, "unknown flag '--colour'"},
      {{"--sweep", "query-std", "--model", standard},
       2,
       "scales the pseudo-queries of Full or Block AttnRes, but"},
      {{"--sweep", "query-std", "--model", zero}, 2, "but they are all zero"},
      {{"--sweep", "block-size", "--model", (dir / "absent").string()}, 1, "does not exist"},
  };
  for (const BadRun& bad : runs) {
    std::vector<std::string> args = {"animate"};
    args.insert(args.end(), bad.args.begin(), bad.args.end());
    args.insert(args.end(), {"--out", out});
    const auto run = run_cli(args);
    std::string line;
    for (const auto& a : args) line += a + " ";
    EXPECT_EQ(run.status, bad.status) << line << "\n" << run.err;
    EXPECT_EQ(run.err.rfind("attnres animate: ", 0), 0u) << run.err;
    EXPECT_NE(run.err.find(bad.message), std::string::npos) << line << "\n" << run.err;
    EXPECT_EQ(run.out, "") << line;
    EXPECT_FALSE(fs::exists(out)) << line;
  }

  // A directory holding other files is refused (exit 1, as every --out: README "Your files are
  // safe"), naming the file and --force; with --force its contents are replaced.
  fs::create_directories(out);
  write_file_atomically(fs::path(out) / "notes.txt", "keep me\n");
  const auto refused = run_cli({"animate", "--sweep", "block-size", "--out", out});
  EXPECT_EQ(refused.status, cli::kExitFailure) << refused.err;
  EXPECT_NE(refused.err.find("notes.txt"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  EXPECT_EQ(read_file(fs::path(out) / "notes.txt"), "keep me\n");
  EXPECT_FALSE(fs::exists(fs::path(out) / "frames.json"));
  const auto forced = run_cli({"animate", "--sweep", "block-size", "--out", out, "--force"});
  EXPECT_EQ(forced.status, 0) << forced.err;
  EXPECT_TRUE(fs::exists(fs::path(out) / "frame_007.png"));
  EXPECT_FALSE(fs::exists(fs::path(out) / "notes.txt"));
  // Written by attnres: a second sweep into it replaces the set without --force (8 frames -> 3).
  const auto again = run_cli({"animate", "--sweep", "query-std", "--frames", "3", "--out", out});
  EXPECT_EQ(again.status, 0) << again.err;
  EXPECT_TRUE(fs::exists(fs::path(out) / "frame_002.png"));
  EXPECT_FALSE(fs::exists(fs::path(out) / "frame_003.png"));
}

#ifdef ATTNRES_CLI_BINARY
TEST(AnimateCli, SigintDuringTheWritePhaseLeavesNothing) {
  test::TempDir dir;
  const fs::path out = dir / "anim", hold = dir / "hold";
  const pid_t child = test::spawn_cli({"animate", "--sweep", "block-size", "--out", out.string()},
                                      "ATTNRES_TEST_HOLD_WRITE", hold.string());
  // Wait (bounded) for the write phase; this is not a timing assertion.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(hold) && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(fs::exists(hold)) << "animate never reached its write phase";
  kill(child, SIGINT);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_FALSE(fs::exists(out)) << "the directory it created is gone again";
}
#endif

}  // namespace test_animate_cli
}  // namespace attnres

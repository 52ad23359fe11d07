// The Training view's state without a window (app/gui/models/training_state.hpp): a shipped
// scenario's [train] table against the values written in its TOML, the round trip through File >
// Save scenario (state -> [train] table -> text -> state), what the view says it cannot take, the
// range problems, and every message Start gives for inputs that do not train.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "attnres/error.hpp"
#include "attnres/scenario.hpp"
#include "training_state.hpp"

namespace attnres::gui {
namespace test_training_state {

namespace fs = std::filesystem;
const fs::path kScenarios = ATTNRES_SCENARIOS_DIR;
// The smallest [model] a scenario file needs beside its [train] table.
const std::string kModel = "[model]\nsublayers = 8\nblocks = 2\nd_model = 64\n";

// A scenario of `train` (the [train] table's lines) beside the shipped ones: data resolves there.
Scenario with_train(const std::string& train) {
  return parse_scenario(
      "title = \"t\"\n" + kModel + "[train]\ndata = \"../resources/data/lab-corpus.txt\"\n" + train,
      (kScenarios / "inline.toml").string());
}

// The message of training_settings(state), or "" when it trains.
std::string settings_error(const TrainingState& state) {
  try {
    training_settings(state);
  } catch (const Error& error) {
    return error.what();
  }
  return {};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The one not-taken sentence that holds `part` (how many there are).
std::size_t count_holding(const TrainingState& state, const std::string& part) {
  return static_cast<std::size_t>(
      std::count_if(state.not_taken.begin(), state.not_taken.end(),
                    [&](const std::string& line) { return contains(line, part); }));
}

// The state saved into a fresh scenario, written as TOML and read back from `directory`.
Scenario saved_and_reread(const TrainingState& state, const fs::path& directory) {
  Scenario saved = parse_scenario(kModel, "model.toml");
  saved.sections = {"io"};
  save_training_state(state, saved);
  return parse_scenario(scenario_to_toml(saved), (directory / "saved.toml").string());
}

TEST(TrainingState, TakesAShippedScenariosTrainTable) {
  // scenarios/block-size-tradeoff.toml's [train], value by value.
  const TrainingState s = training_state(load_scenario(kScenarios / "block-size-tradeoff.toml"));
  EXPECT_EQ(fs::path(s.data_path).lexically_normal(),
            (kScenarios / "../resources/data/lab-corpus.txt").lexically_normal());
  EXPECT_FALSE(s.builtin);
  EXPECT_EQ(s.layers, 4);
  EXPECT_EQ(s.d_model, 64);
  EXPECT_EQ(s.heads, 4);
  EXPECT_EQ(s.ffn, 172);
  EXPECT_EQ(s.steps, 150);
  EXPECT_EQ(s.seq, 64);
  EXPECT_EQ(s.batch, 8);
  EXPECT_EQ(s.lr, 5e-3);
  EXPECT_EQ(s.seed, 1u);  // seeds = [1, ..., 8]: consecutive, all taken
  EXPECT_EQ(s.seeds, 8);
  EXPECT_EQ(s.threads, 0);
  EXPECT_EQ(s.precision, "f32");
  EXPECT_TRUE(s.standard);
  EXPECT_TRUE(s.full);
  EXPECT_TRUE(s.block);
  EXPECT_EQ(s.block_size, 8);  // blocks = [1, 2, 4]: N = 1 of L = 8 sublayers
  EXPECT_FALSE(s.other);
  // The report holds out TrainOptions' 5 % (the table has no key for it).
  EXPECT_EQ(s.validation_fraction, 0.05);
  // Not taken: the other two N, eval_every = 25 (the view validates every 150 / 10 = 15 steps)
  // and the masks; nothing else.
  EXPECT_EQ(count_holding(s, "blocks lists 3 values of N"), 1u);
  EXPECT_EQ(count_holding(s, "eval_every = 25"), 1u);
  EXPECT_EQ(count_holding(s, "every steps / 10 = 15 steps"), 1u);
  EXPECT_EQ(count_holding(s, "masks (embedding, distant:2, recent:1)"), 1u);
  EXPECT_EQ(s.not_taken.size(), 3u);
  EXPECT_EQ(training_state_problem(s), "");
  // Start trains the three boxes at that shape.
  const TrainingSettings settings = training_settings(s);
  ASSERT_EQ(settings.schemes.size(), 3u);
  EXPECT_EQ(settings.schemes[2].key, "block_S8");
  EXPECT_EQ(settings.config.intermediate_size, 172);
  EXPECT_EQ(settings.options.steps, 150);
  EXPECT_FALSE(settings.options.engine.bf16);
}

TEST(TrainingState, TakesTheSchemesThatAreTheBoxesAndSaysTheRest) {
  // scenarios/table4-tiny.toml: twelve specs, no blocks. standard, full and block (S = 4, the
  // report's S for named Block schemes) are the boxes, denseformer the other scheme; eight are
  // not taken.
  const TrainingState s = training_state(load_scenario(kScenarios / "table4-tiny.toml"));
  EXPECT_TRUE(s.standard);
  EXPECT_TRUE(s.full);
  EXPECT_TRUE(s.block);
  EXPECT_EQ(s.block_size, 4);
  EXPECT_TRUE(s.other);
  EXPECT_EQ(s.other_spec, "denseformer");
  for (const char* spec :
       {"mhc", "full_input_query", "full_scalars", "full_sigmoid", "full_no_key_norm",
        "full_window", "block_multihead", "block_no_key_norm"}) {
    EXPECT_EQ(count_holding(s, std::string("schemes entry '") + spec + "' is not taken"), 1u)
        << spec;
  }
  EXPECT_EQ(count_holding(s, "eval_every = 50"), 1u);  // 300 / 10 = 30 here
  EXPECT_EQ(s.not_taken.size(), 9u);
  // A named Block scheme beside a Block N of another S: the report trains it at S = 4, so the
  // view takes its canonical spec (at S = 2 here it would be another scheme).
  const TrainingState other =
      training_state(with_train("layers = 2\nd_model = 32\nheads = 2\nschemes = "
                                "[\"block_sigmoid\"]\nblocks = [2]\nseeds = [3]\n"));
  EXPECT_TRUE(other.block);
  EXPECT_EQ(other.block_size, 2);
  EXPECT_TRUE(other.other);
  EXPECT_EQ(other.other_spec, "block:block_size=4,gate=sigmoid");
  EXPECT_EQ(training_settings(other).schemes.back().block_size, 4);
}

TEST(TrainingState, SaysWhatItCannotTake) {
  // The lesson-defect scenario: three N and seeds 1, 5, 9.
  const TrainingState s = training_state(with_train(
      "layers = 4\nd_model = 32\nheads = 2\nschemes = [\"standard\", \"full\", \"block\"]\n"
      "blocks = [1, 2, 4]\nsteps = 5\nseq = 16\nbatch = 2\nseeds = [1, 5, 9]\nkv_heads = 1\n"
      "save_models = true\n"));
  EXPECT_EQ(count_holding(s, "blocks lists 3 values of N"), 1u);
  EXPECT_EQ(count_holding(s, "N = 1 is set"), 1u);
  EXPECT_EQ(count_holding(s, "seeds are not consecutive"), 1u);
  EXPECT_EQ(count_holding(s, "trains 3 consecutive seeds from 1"), 1u);
  EXPECT_EQ(count_holding(s, "kv_heads = 1"), 1u);
  EXPECT_EQ(count_holding(s, "save_models = true"), 1u);
  // "block" (S = 4) after blocks = [1, ...] set the box: the other scheme, at the report's S.
  EXPECT_EQ(s.block_size, 8);
  EXPECT_TRUE(s.other);
  EXPECT_EQ(s.other_spec, "block:block_size=4");
  EXPECT_EQ(s.seed, 1u);
  EXPECT_EQ(s.seeds, 3);
  EXPECT_EQ(s.not_taken.size(), 4u);
  // Listed twice: said, trained once.
  const TrainingState twice =
      training_state(with_train("schemes = [\"standard\", \"standard\"]\nseeds = [1]\n"));
  EXPECT_EQ(count_holding(twice, "'standard' is listed twice"), 1u);
  EXPECT_FALSE(twice.full);
  EXPECT_FALSE(twice.block);
  EXPECT_EQ(training_settings([&] {
              TrainingState with_data = twice;
              with_data.builtin = true;
              return with_data;
            }())
                .schemes.size(),
            1u);
  // A scenario without [train]: the view's defaults, nothing said.
  const TrainingState none = training_state(load_scenario(kScenarios / "paper-table1.toml"));
  EXPECT_EQ(training_state_json(none), training_state_json(default_training_state()));
}

TEST(TrainingState, SavesBackToTheSameState) {
  const fs::path elsewhere = fs::temp_directory_path() / "attnres-training-state";
  for (const char* name : {"block-size-tradeoff.toml", "block-size-study.toml",
                           "shipped-models.toml", "table4-tiny.toml"}) {
    const Scenario opened = load_scenario(kScenarios / name);
    const TrainingState state = training_state(opened);
    const Scenario back = saved_and_reread(state, elsewhere);
    ASSERT_TRUE(back.training.has_value()) << name;
    // "training" is among the sections: the saved table trains in `attnres report`.
    EXPECT_NE(std::find(back.sections.begin(), back.sections.end(), "training"),
              back.sections.end());
    // The data by its absolute path: the saved file may be anywhere.
    EXPECT_EQ(back.training->data_path, fs::absolute(opened.training->data_path).lexically_normal())
        << name;
    TrainingState again = training_state(back);
    EXPECT_TRUE(again.not_taken.empty()) << name;  // only what the view trains was written
    again.data_path = state.data_path;
    again.not_taken = state.not_taken;
    EXPECT_EQ(training_state_json(again), training_state_json(state))
        << name << "\n"
        << nlohmann::json::diff(training_state_json(state), training_state_json(again)).dump(1);
  }
  // A state of the view's own: S = 3 does not divide L = 4 (a block spec then), a named Block
  // scheme at that S (its canonical spec), seeds 7, 8, 9, bf16.
  TrainingState own = default_training_state();
  own.data_path = (kScenarios / "../resources/data/lab-corpus.txt").lexically_normal().string();
  own.layers = 2;
  own.block_size = 3;
  own.other = true;
  own.other_spec = "block_sigmoid";
  own.seed = 7;
  own.seeds = 3;
  own.precision = "bf16";
  own.lr = 1.25e-3;
  const Scenario back = saved_and_reread(own, elsewhere);
  ASSERT_TRUE(back.training.has_value());
  EXPECT_EQ(back.training->seeds, (std::vector<std::uint64_t>{7, 8, 9}));
  EXPECT_TRUE(back.training->blocks.empty());
  EXPECT_EQ(back.training->schemes,
            (std::vector<std::string>{"standard", "full", "block:block_size=3",
                                      "block:block_size=3,gate=sigmoid"}));
  const TrainingState again = training_state(back);
  EXPECT_TRUE(again.not_taken.empty());
  EXPECT_TRUE(again.block);
  EXPECT_EQ(again.block_size, 3);
  EXPECT_EQ(again.other_spec, "block:block_size=3,gate=sigmoid");
  EXPECT_EQ(again.seed, 7u);
  EXPECT_EQ(again.seeds, 3);
  EXPECT_EQ(again.precision, "bf16");
  EXPECT_EQ(again.lr, 1.25e-3);
  // The same runs: every scheme's key, mode, S and scheme (the spec's name aside).
  const TrainingSettings a = training_settings(own), b = training_settings(again);
  ASSERT_EQ(a.schemes.size(), b.schemes.size());
  for (std::size_t i = 0; i < a.schemes.size(); ++i) {
    EXPECT_EQ(a.schemes[i].name, b.schemes[i].name) << i;
    EXPECT_EQ(a.schemes[i].block_size, b.schemes[i].block_size) << i;
    EXPECT_EQ(a.schemes[i].scheme, b.schemes[i].scheme) << i;
  }
  // The built-in sample, or no scheme, is no table the reader takes: none is written.
  TrainingState builtin = default_training_state();
  builtin.builtin = true;
  Scenario none;
  none.sections = {"io", "training"};
  none.training = ScenarioTraining{};
  save_training_state(builtin, none);
  EXPECT_FALSE(none.training.has_value());
  EXPECT_EQ(none.sections, std::vector<std::string>{"io"});
  TrainingState unchecked = own;
  unchecked.standard = unchecked.full = unchecked.block = unchecked.other = false;
  save_training_state(unchecked, none);
  EXPECT_FALSE(none.training.has_value());
}

TEST(TrainingState, NamesTheFieldBeyondItsRange) {
  EXPECT_EQ(training_state_problem(default_training_state()), "");
  // The reader takes layers up to 64; the view's field up to 32.
  EXPECT_EQ(training_state_problem(training_state(with_train("layers = 40\nd_model = 32\n"))),
            "training: [train] layers = 40 is beyond what the GUI's field takes (1 .. 32)");
  EXPECT_EQ(training_state_problem(training_state(with_train("lr = 5.0\n"))),
            "training: [train] lr = 5 is beyond what the GUI's field takes (1e-05 .. 1)");
  EXPECT_EQ(training_state_problem(training_state(with_train("seeds = [2000000]\n"))),
            "training: [train] seeds (the first) = 2000000 is beyond what the GUI's field takes "
            "(0 .. 1000000)");
  EXPECT_EQ(training_state_problem(training_state(with_train("d_model = 1024\nheads = 8\n"))),
            "training: [train] d_model = 1024 is beyond what the GUI's field takes (4 .. 512)");
  TrainingState s = default_training_state();
  s.block_size = 5;  // L = 4
  EXPECT_EQ(training_state_problem(s),
            "training: block size S = 5 is beyond what the GUI's field takes (1 .. L = 4)");
  s = default_training_state();
  s.precision = "f16";
  EXPECT_EQ(training_state_problem(s),
            "training: precision must be \"bf16\" or \"f32\", got \"f16\"");
}

TEST(TrainingState, StartSaysWhyInputsDoNotTrain) {
  TrainingState s = default_training_state();
  EXPECT_EQ(settings_error(s),
            "training: choose a text file (Browse...) or press \"Use built-in sample text\"");
  s.builtin = true;
  EXPECT_EQ(settings_error(s), "");
  const TrainingSettings defaults = training_settings(s);
  EXPECT_TRUE(defaults.builtin);
  ASSERT_EQ(defaults.schemes.size(), 3u);
  EXPECT_EQ(defaults.schemes[0].key, "standard");
  EXPECT_EQ(defaults.schemes[1].name, "Full AttnRes");
  EXPECT_EQ(defaults.schemes[2].name, "Block AttnRes (S = 2)");
  EXPECT_EQ(defaults.config.hidden_size, 32);
  EXPECT_EQ(defaults.config.num_key_value_heads, 2);
  EXPECT_EQ(defaults.options.validation_fraction, 0.1);
  // A path typed beside the built-in flag is the file trained on.
  s.data_path = "  /some/text.txt ";
  EXPECT_FALSE(training_settings(s).builtin);
  EXPECT_EQ(training_settings(s).data_path, "/some/text.txt");
  s.data_path.clear();

  TrainingState shape = s;
  shape.d_model = 16;
  shape.heads = 3;
  const std::string bad_shape = settings_error(shape);
  EXPECT_TRUE(contains(bad_shape, "training: invalid model shape")) << bad_shape;
  EXPECT_TRUE(contains(bad_shape, "heads (3) must divide d_model (16)")) << bad_shape;

  TrainingState other = s;
  other.d_model = 16;
  other.other = true;
  other.other_spec = "nonsense";
  const std::string unknown = settings_error(other);
  EXPECT_EQ(unknown.rfind("training: another scheme 'nonsense': ", 0), 0u) << unknown;
  EXPECT_TRUE(contains(unknown, "unknown scheme 'nonsense'")) << unknown;
  other.other_spec = "full:heads=3";
  const std::string misfit = settings_error(other);
  EXPECT_EQ(misfit.rfind("training: another scheme 'full:heads=3'", 0), 0u) << misfit;
  EXPECT_TRUE(contains(misfit, "attn_res.heads (3) must be a positive divisor of hidden_size (16)"))
      << misfit;
  other.other_spec = " mhc:streams=2 ";
  ASSERT_EQ(settings_error(other), "");
  EXPECT_EQ(training_settings(other).schemes.back().name, "mHC (m = 2)");

  TrainingState none = s;
  none.standard = none.full = none.block = none.other = false;
  EXPECT_EQ(settings_error(none),
            "training: check at least one scheme (standard, Full AttnRes, Block AttnRes or "
            "another scheme)");
  // The dump says the same.
  const nlohmann::json dump = training_state_json(none);
  EXPECT_EQ(dump["settings_error"], settings_error(none));
  EXPECT_TRUE(dump["trains"].empty());
  EXPECT_EQ(training_state_json(s)["trains"].size(), 3u);
}

// A study opened and saved unchanged keeps its whole grid (five N, five seeds, eval_every) — the
// view shows one N, but saving must not cut the study down to it; an edited form saves the form.
TEST(TrainingState, AnUnchangedStudySavesAsItWasRead) {
  const Scenario opened = load_scenario(kScenarios / "block-size-study.toml");
  ASSERT_TRUE(opened.training);
  ASSERT_EQ(opened.training->blocks.size(), 5u);
  TrainingState state = training_state(opened);
  Scenario saved;
  save_training_state(state, saved, &opened);
  ASSERT_TRUE(saved.training);
  EXPECT_EQ(saved.training->blocks, opened.training->blocks);
  EXPECT_EQ(saved.training->seeds, opened.training->seeds);
  EXPECT_EQ(saved.training->eval_every, opened.training->eval_every);
  EXPECT_TRUE(saved.training->data_path.is_absolute());
  EXPECT_TRUE(fs::equivalent(saved.training->data_path, opened.training->data_path));
  EXPECT_NE(std::find(saved.sections.begin(), saved.sections.end(), "training"),
            saved.sections.end());
  state.steps = 7;  // edited: the form is saved
  Scenario edited;
  save_training_state(state, edited, &opened);
  ASSERT_TRUE(edited.training);
  EXPECT_EQ(edited.training->steps, 7);
  EXPECT_EQ(edited.training->blocks.size(), 1u);
}

}  // namespace test_training_state
}  // namespace attnres::gui

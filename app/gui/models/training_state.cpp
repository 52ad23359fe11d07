// The one state behind the Training view (training_state.hpp; docs/training.md).
#include "training_state.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "attnres/cost.hpp"
#include "attnres/engine.hpp"
#include "attnres/error.hpp"
#include "attnres/training.hpp"

namespace attnres::gui {

namespace {

std::string precision_name(Precision precision) {
  return precision == Precision::bf16 ? "bf16" : "f32";
}

// `text` without the blanks around it (a typed path or spec).
std::string trimmed(std::string text) {
  text.erase(0, text.find_first_not_of(" \t\r\n"));
  text.erase(text.find_last_not_of(" \t\r\n") + 1);
  return text;
}

// The shortest text that reads back to the same double (3e-05, not 3.0000000000000001e-05).
std::string number_text(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

// The scheme a box trains: the paper's defaults of its mode (Block AttnRes at `block_size`).
AttnResConfig box_scheme(ResidualMode mode, int block_size) {
  AttnResConfig scheme;
  scheme.mode = mode;
  if (mode == ResidualMode::block) scheme.block_size = block_size;
  return scheme;
}

// Another scheme's spec at the view's sizes: named Block schemes take the view's S.
AttnResConfig view_scheme(const std::string& spec, int layers, int d_model, int block_size) {
  CostInputs sizes;
  sizes.sublayers = 2 * layers;
  sizes.d_model = d_model;
  sizes.block_size = block_size;
  return parse_scheme_spec(spec, sizes);
}

// "The scenario's [train] KEY ..." — the not-taken sentences, built by appending (GCC 12 -O3
// warns falsely on `"'" + s + "'"` chains).
std::string not_taken_sentence(const std::string& key, const std::string& rest) {
  std::string sentence = "The scenario's [train] ";
  sentence += key;
  sentence += rest;
  return sentence;
}

// The view's schemes from the [train] table's lists: the boxes for the specs that are exactly
// their schemes, the first other spec as "another scheme", the rest said in not_taken.
void take_schemes(const ScenarioTraining& t, TrainingState& s) {
  const int L = t.sublayers();
  s.standard = false;
  s.full = false;
  s.block = !t.blocks.empty();
  s.other = false;
  // The block size `attnres report` gives named Block schemes (ScenarioTraining::scheme_of) when
  // no block count sets the box's: then another Block scheme trains here as it does there.
  s.block_size = t.blocks.empty() ? std::min(4, L) : L / t.blocks.front();
  if (t.blocks.size() > 1) {
    std::string note = "The scenario's [train] blocks lists ";
    note += std::to_string(t.blocks.size());
    note += " values of N; this tab trains one Block AttnRes N at a time: N = ";
    note += std::to_string(t.blocks.front());
    note += " is set (attnres report trains them all).";
    s.not_taken.push_back(note);
  }
  for (const std::string& spec : t.schemes) {
    std::optional<AttnResConfig> scheme;
    try {
      scheme = t.scheme_of(spec);
    } catch (const Error&) {
      // A table built in code, never read: the spec goes to "another scheme", whose Start says
      // what is wrong with it.
    }
    bool taken = true, twice = false;
    if (scheme && *scheme == box_scheme(ResidualMode::standard, 0)) {
      twice = s.standard;
      s.standard = true;
    } else if (scheme && *scheme == box_scheme(ResidualMode::full, 0)) {
      twice = s.full;
      s.full = true;
    } else if (scheme && !s.block &&
               *scheme == box_scheme(ResidualMode::block, scheme->block_size)) {
      s.block = true;
      s.block_size = scheme->block_size;
    } else if (!s.other) {
      s.other = true;
      s.other_spec = spec;
    } else {
      taken = false;
    }
    if (taken && !twice) continue;
    std::string rest = "schemes entry '";
    rest += spec;
    rest += twice ? "' is listed twice; this tab trains it once."
                  : "' is not taken: this tab trains the three boxes and one other scheme "
                    "(attnres report trains every entry).";
    s.not_taken.push_back(not_taken_sentence("", rest));
  }
  // Another scheme trains at the view's S; where that is not the scheme `attnres report` trains
  // (a named Block scheme beside a Block N of another S), its canonical spec says the report's.
  if (s.other) {
    try {
      const AttnResConfig report = t.scheme_of(s.other_spec);
      if (view_scheme(s.other_spec, s.layers, s.d_model, s.block_size) != report)
        s.other_spec = scheme_spec(report);
    } catch (const Error&) {
      // Said by Start (training_settings).
    }
  }
}

}  // namespace

TrainingState default_training_state() {
  TrainingState s;
  s.precision = precision_name(default_training_precision());
  return s;
}

TrainingState training_state(const Scenario& scenario) {
  TrainingState s = default_training_state();
  if (!scenario.training) return s;
  const ScenarioTraining& t = *scenario.training;
  s.data_path = t.data_path.string();
  // The share `attnres report` holds out (the [train] table has no key for it).
  s.validation_fraction = TrainOptions{}.validation_fraction;
  s.layers = t.layers;
  s.d_model = t.d_model;
  s.heads = t.heads;
  s.ffn = t.model_config().intermediate_size;
  s.seq = t.seq;
  s.batch = t.batch;
  s.steps = t.steps;
  s.lr = t.lr;
  s.threads = t.threads;
  if (!t.precision.empty()) s.precision = t.precision;
  if (!t.seeds.empty()) {
    // The view trains consecutive seeds: the scenario's first seed and as many as it lists.
    s.seed = t.seeds.front();
    s.seeds = static_cast<int>(t.seeds.size());
  }
  take_schemes(t, s);
  bool consecutive = true;
  for (std::size_t i = 1; i < t.seeds.size(); ++i)
    consecutive = consecutive && t.seeds[i] == t.seeds[i - 1] + 1;
  if (!consecutive) {
    std::string note = "The scenario's seeds are not consecutive; this tab trains ";
    note += std::to_string(t.seeds.size());
    note += " consecutive seeds from ";
    note += std::to_string(t.seeds.front());
    note += " (attnres report trains the listed ones).";
    s.not_taken.push_back(note);
  }
  if (t.kv_heads > 0 && t.kv_heads != t.heads) {
    s.not_taken.push_back(
        not_taken_sentence("kv_heads = " + std::to_string(t.kv_heads),
                           " is not taken: this tab trains as many key-value heads as heads."));
  }
  const std::int64_t every = std::max<std::int64_t>(1, t.steps / 10);
  if (t.eval_every > 0 && t.eval_every != every) {
    std::string rest = " is not taken: this tab validates every steps / 10 = ";
    rest += std::to_string(every);
    rest += " steps.";
    s.not_taken.push_back(not_taken_sentence("eval_every = " + std::to_string(t.eval_every), rest));
  }
  if (t.save_models) {
    s.not_taken.push_back(not_taken_sentence(
        "save_models = true",
        " is not taken: Save models... writes this tab's models when a run has ended."));
  }
  if (!t.masks.empty()) {
    std::string masks;
    for (const std::string& mask : t.masks) {
      if (!masks.empty()) masks += ", ";
      masks += mask;
    }
    std::string key = "masks (";
    key += masks;
    key += ")";
    s.not_taken.push_back(not_taken_sentence(
        key, " are not taken: this tab trains; attnres report also masks the trained models."));
  }
  return s;
}

void save_training_state(const TrainingState& state, Scenario& scenario, const Scenario* opened) {
  if (opened != nullptr && opened->training &&
      training_state_json(training_state(*opened)) == training_state_json(state)) {
    ScenarioTraining t = *opened->training;
    // Absolute: the reader resolves `data` against the saved file's directory, wherever it is.
    t.data_path = std::filesystem::absolute(t.data_path).lexically_normal();
    t.data = t.data_path.string();
    scenario.training = std::move(t);
    if (std::find(scenario.sections.begin(), scenario.sections.end(), "training") ==
        scenario.sections.end())
      scenario.sections.push_back("training");
    return;
  }
  // What the reader would refuse is no table: no data file (the built-in sample lives in memory
  // only), or a state that does not train.
  bool trains = !state.data_path.empty();
  TrainingSettings settings;
  if (trains) {
    try {
      settings = training_settings(state);
    } catch (const Error&) {
      trains = false;
    }
  }
  auto& sections = scenario.sections;
  const auto listed = std::find(sections.begin(), sections.end(), "training");
  if (!trains) {
    scenario.training.reset();
    if (listed != sections.end()) sections.erase(listed);
    return;
  }
  ScenarioTraining t;
  // Absolute: the reader resolves `data` against the saved file's directory, wherever it is.
  t.data_path = std::filesystem::absolute(settings.data_path).lexically_normal();
  t.data = t.data_path.string();
  t.layers = state.layers;
  t.d_model = state.d_model;
  t.heads = state.heads;
  t.kv_heads = 0;  // = heads, as the view trains
  t.ffn = state.ffn;
  t.steps = state.steps;
  t.seq = state.seq;
  t.batch = state.batch;
  t.lr = state.lr;
  t.threads = state.threads;
  t.precision = state.precision;
  t.seeds.clear();
  for (int i = 0; i < state.seeds; ++i)
    t.seeds.push_back(state.seed + static_cast<std::uint64_t>(i));
  t.schemes.clear();
  if (state.standard) t.schemes.push_back("standard");
  if (state.full) t.schemes.push_back("full");
  const int L = 2 * state.layers;
  if (state.block) {
    if (L % state.block_size == 0)
      t.blocks.push_back(L / state.block_size);
    else  // blocks = [N] needs N to divide L; the spec keeps any S
      t.schemes.push_back(scheme_spec(box_scheme(ResidualMode::block, state.block_size)));
  }
  if (state.other) {
    // As typed where the report trains the same scheme; else its canonical spec (a named Block
    // scheme trains at the view's S here, at S = 4 in the report).
    // (training_settings puts another scheme last.)
    const AttnResConfig scheme = *settings.schemes.back().scheme;
    std::string spec = trimmed(state.other_spec);
    try {
      if (t.scheme_of(spec) != scheme) spec = scheme_spec(scheme);
    } catch (const Error&) {
      spec = scheme_spec(scheme);
    }
    t.schemes.push_back(spec);
  }
  scenario.training = t;
  // The writer always names the sections, and the reader adds "training" only to a file that
  // names none: without it the saved [train] table would never train.
  if (listed == sections.end()) sections.push_back("training");
}

std::string training_state_problem(const TrainingState& state) {
  auto beyond = [](const std::string& name, const std::string& value, const std::string& low,
                   const std::string& high) {
    std::string out = "training: ";
    out += name;
    out += " = ";
    out += value;
    out += " is beyond what the GUI's field takes (";
    out += low;
    out += " .. ";
    out += high;
    out += ")";
    return out;
  };
  const std::pair<const char*, std::pair<std::int64_t, TrainingRange<int>>> fields[] = {
      {"[train] layers", {state.layers, kTrainLayers}},
      {"[train] d_model", {state.d_model, kTrainDModel}},
      {"[train] heads", {state.heads, kTrainHeads}},
      {"[train] seq", {state.seq, kTrainSeq}},
      {"[train] batch", {state.batch, kTrainBatch}},
      {"[train] steps", {state.steps, kTrainSteps}},
      {"[train] threads", {state.threads, kTrainThreads}},
      {"[train] ffn", {state.ffn, kTrainFfn}},
      {"[train] seeds (how many)", {state.seeds, kTrainSeeds}}};
  for (const auto& [name, field] : fields) {
    const auto& [value, range] = field;
    if (value < range.low || value > range.high)
      return beyond(name, std::to_string(value), std::to_string(range.low),
                    std::to_string(range.high));
  }
  if (state.seed > static_cast<std::uint64_t>(kTrainSeed.high)) {
    return beyond("[train] seeds (the first)", std::to_string(state.seed),
                  std::to_string(kTrainSeed.low), std::to_string(kTrainSeed.high));
  }
  if (!kTrainLr.holds(state.lr)) {
    return beyond("[train] lr", number_text(state.lr), number_text(kTrainLr.low),
                  number_text(kTrainLr.high));
  }
  if (!kTrainValidationFraction.holds(state.validation_fraction)) {
    return beyond("validation fraction", number_text(state.validation_fraction),
                  number_text(kTrainValidationFraction.low),
                  number_text(kTrainValidationFraction.high));
  }
  if (state.block_size < kTrainBlockSizeMin || state.block_size > 2 * state.layers) {
    return beyond("block size S", std::to_string(state.block_size),
                  std::to_string(kTrainBlockSizeMin), "L = " + std::to_string(2 * state.layers));
  }
  if (state.precision != "bf16" && state.precision != "f32") {
    std::string out = "training: precision must be \"bf16\" or \"f32\", got \"";
    out += state.precision;
    out += "\"";
    return out;
  }
  return {};
}

TrainingSettings training_settings(const TrainingState& state) {
  TrainingSettings s;
  s.data_path = trimmed(state.data_path);
  s.builtin = state.builtin && s.data_path.empty();
  if (!s.builtin && s.data_path.empty()) {
    throw Error("training: choose a text file (Browse...) or press \"Use built-in sample text\"");
  }
  s.validation_fraction = state.validation_fraction;
  s.config.num_hidden_layers = state.layers;
  s.config.hidden_size = state.d_model;
  s.config.num_attention_heads = state.heads;
  s.config.num_key_value_heads = state.heads;
  s.config.intermediate_size = state.ffn;
  s.config.vocab_size = kByteVocabulary;
  s.config.validate("training: invalid model shape", [](const std::string& key) -> std::string {
    if (key == "hidden_size") return "d_model";
    if (key == "num_hidden_layers") return "layers";
    if (key == "num_attention_heads" || key == "num_key_value_heads") return "heads";
    if (key == "intermediate_size") return "ffn";
    return key;
  });
  s.seed = state.seed;
  s.seeds = state.seeds;
  s.options.steps = state.steps;
  s.options.sequence_length = state.seq;
  s.options.batch = state.batch;
  s.options.lr = state.lr;
  s.options.seed = s.seed;
  s.options.validation_fraction = s.validation_fraction;
  s.options.engine.threads = state.threads;
  s.options.engine.bf16 = state.precision == "bf16";
  s.options.validate();
  if (state.standard)
    s.schemes.push_back({"standard", "standard", ResidualMode::standard, 0, 0, std::nullopt});
  if (state.full)
    s.schemes.push_back({"full", "Full AttnRes", ResidualMode::full, 0, 1, std::nullopt});
  if (state.block) {
    const int size = state.block_size;
    s.schemes.push_back({"block_S" + std::to_string(size),
                         "Block AttnRes (S = " + std::to_string(size) + ")", ResidualMode::block,
                         size, 2, std::nullopt});
  }
  if (state.other) {
    const std::string spec = trimmed(state.other_spec);
    AttnResConfig scheme;
    try {
      scheme = view_scheme(spec, state.layers, state.d_model, state.block_size);
    } catch (const Error& error) {
      std::string message = "training: another scheme '";
      message += spec;
      message += "': ";
      message += error.what();
      throw Error(message);
    }
    ModelConfig checked = s.config;
    checked.attn_res = scheme;
    std::string where = "training: another scheme '";
    where += spec;
    where += "'";
    checked.validate(where);
    s.schemes.push_back(
        {scheme_file_name(spec), scheme.describe(), scheme.mode, scheme.block_size, 3, scheme});
  }
  if (s.schemes.empty()) {
    throw Error(
        "training: check at least one scheme (standard, Full AttnRes, Block AttnRes or another "
        "scheme)");
  }
  return s;
}

nlohmann::json training_state_json(const TrainingState& state) {
  nlohmann::json j;
  j["data_path"] = state.data_path;
  j["builtin_sample"] = state.builtin;
  j["validation_fraction"] = state.validation_fraction;
  j["layers"] = state.layers;
  j["sublayers"] = 2 * state.layers;
  j["d_model"] = state.d_model;
  j["heads"] = state.heads;
  j["ffn"] = state.ffn;
  j["seq"] = state.seq;
  j["batch"] = state.batch;
  j["steps"] = state.steps;
  j["lr"] = state.lr;
  j["seed"] = state.seed;
  j["seeds"] = state.seeds;
  j["threads"] = state.threads;
  j["precision"] = state.precision;
  j["schemes"] = {{"standard", state.standard}, {"full", state.full},
                  {"block", state.block},       {"block_size", state.block_size},
                  {"other", state.other},       {"other_spec", state.other_spec}};
  j["problem"] = training_state_problem(state);
  // What Start would train, or why it would not start.
  try {
    const TrainingSettings settings = training_settings(state);
    nlohmann::json trained = nlohmann::json::array();
    for (const TrainingScheme& scheme : settings.schemes)
      trained.push_back({{"key", scheme.key}, {"name", scheme.name}});
    j["trains"] = trained;
    j["settings_error"] = nullptr;
  } catch (const Error& error) {
    j["trains"] = nlohmann::json::array();
    j["settings_error"] = error.what();
  }
  j["not_taken"] = state.not_taken;
  return j;
}

ViewDump training_view_dump(const Scenario& scenario, const Progress&) {
  if (!scenario.training) return {nullptr, "the scenario has no [train] table"};
  nlohmann::json state = training_state_json(training_state(scenario));
  nlohmann::json results = {{"trains", state["trains"]},
                            {"settings_error", state["settings_error"]},
                            {"losses", "not computed: they need the training run (Start)"}};
  state.erase("trains");
  state.erase("settings_error");
  return {{{"state", state}, {"results", results}}, ""};
}

}  // namespace attnres::gui

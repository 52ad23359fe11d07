#include "attnres/scenario.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "attnres/atomic_file.hpp"
#include "attnres/cost.hpp"
#include "attnres/cost_input_fields.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/hardware_reader.hpp"
#include "attnres/history_mask.hpp"
#include "attnres/toml_reader.hpp"

namespace attnres {

ModelConfig ScenarioTraining::model_config() const {
  ModelConfig config;
  config.num_hidden_layers = layers;
  config.hidden_size = d_model;
  config.num_attention_heads = heads;
  config.num_key_value_heads = kv_heads > 0 ? kv_heads : heads;
  config.intermediate_size = ffn > 0 ? ffn : static_cast<int>(std::lround(8.0 * d_model / 3.0));
  config.vocab_size = 256;  // bytes (docs/training.md)
  return config;
}

std::string scheme_file_name(const std::string& spec) {
  std::string name = spec;
  for (char& c : name) {
    if (c == ':' || c == ',' || c == '=' || c == ' ') c = '_';
  }
  return name;
}

AttnResConfig ScenarioTraining::scheme_of(const std::string& spec) const {
  CostInputs sizes;
  sizes.sublayers = sublayers();
  sizes.d_model = d_model;
  sizes.block_size = std::min(4, sublayers());
  AttnResConfig scheme;
  try {
    scheme = parse_scheme_spec(spec, sizes);
  } catch (const Error& error) {
    throw Error("train.schemes entry '" + spec + "': " + error.what());
  }
  ModelConfig config = model_config();
  config.attn_res = scheme;
  config.validate("train.schemes entry '" + spec + "'");
  return scheme;
}

const std::vector<std::string>& scenario_sections() {
  static const std::vector<std::string> sections = {
      "io",         "history", "prefill", "pipeline",     "boundaries",
      "flops",      "scaling", "time",    "pipeline_sim", "training",
      "strategies", "decode",  "layout",  "recompute",    "calibration"};
  return sections;
}

namespace {

// Scenario files through the core's one typed TOML reader (toml_reader.hpp).
class ScenarioReader : public detail::TomlReader {
 public:
  explicit ScenarioReader(std::string source) : TomlReader(std::move(source)) {}

  // Reads the integer inputs of one table into `in` and remembers where each was, for later
  // range errors.
  void read_inputs(const toml::table& t, std::string_view section, CostInputs& in) {
    for (const auto& field : cost_input_fields()) {
      if (field.section != section) continue;
      const std::string key(field.key);
      if (const toml::node* node = t.get(key)) {
        in.*field.member = integer(*node, std::string(section) + "." + key);
        locations_[key] = node->source();
      }
    }
  }

  std::vector<std::int64_t> axis_values(const toml::node& node, const std::string& name,
                                        const Scenario& scenario) const {
    std::vector<std::int64_t> values;
    if (node.is_string()) {
      const std::string text = node.as_string()->get();
      if (text != "divisors") {
        fail(node.source(), name +
                                ": expected an array of integers, \"divisors\" or a table "
                                "{from, to, step|factor}, got \"" +
                                text + "\"");
      }
      return divisors(scenario.inputs.sublayers);
    }
    if (node.is_array()) {
      for (const auto& item : *node.as_array()) values.push_back(integer(item, name + " entry"));
      if (values.empty()) fail(node.source(), name + " is empty");
      return values;
    }
    if (node.is_table()) {
      const toml::table& range = *node.as_table();
      check_keys(range, name + ".", {"from", "to", "step", "factor"});
      const toml::node* from = range.get("from");
      const toml::node* to = range.get("to");
      if (!from || !to) fail(node.source(), name + " needs 'from' and 'to'");
      const std::int64_t first = integer(*from, name + ".from");
      const std::int64_t last = integer(*to, name + ".to");
      if (last < first)
        fail(to->source(), name + ".to (" + std::to_string(last) + ") is below from");
      const toml::node* step = range.get("step");
      const toml::node* factor = range.get("factor");
      if ((step == nullptr) == (factor == nullptr)) {
        fail(node.source(), name + " needs exactly one of 'step' or 'factor'");
      }
      SweepRange bounds;
      bounds.from = first;
      bounds.to = last;
      if (step) {
        bounds.step = integer(*step, name + ".step");
        if (bounds.step < 1) fail(step->source(), name + ".step must be >= 1");
      } else {
        bounds.factor = integer(*factor, name + ".factor");
        if (bounds.factor < 2) fail(factor->source(), name + ".factor must be >= 2");
        if (first < 1) fail(from->source(), name + ".from must be >= 1 with a factor");
      }
      try {
        return expand_sweep_range(bounds, name);
      } catch (const Error& error) {
        fail(node.source(), error.what());
      }
    }
    fail(node.source(), name +
                            ": expected an array of integers, \"divisors\" or a table "
                            "{from, to, step|factor}, got " +
                            type_name(node));
  }

  Scenario read(const toml::table& root) {
    Scenario s;
    s.source = source();
    check_keys(
        root, "",
        {"title", "description", "source", "sections", "model", "sequence", "parallel", "scaling",
         "sweep", "hardware", "moe", "pipeline", "train", "implementation", "calibration"});
    if (const toml::node* n = root.get("title")) s.title = string(*n, "title");
    if (const toml::node* n = root.get("source")) s.model_source = string(*n, "source");
    read_implementation(root, s);
    if (const toml::node* n = root.get("description")) s.description = string(*n, "description");

    if (const toml::node* n = root.get("sections")) {
      if (!n->is_array()) fail(n->source(), "sections must be an array of strings");
      for (const auto& item : *n->as_array()) {
        const std::string name = string(item, "sections entry");
        const auto& known = scenario_sections();
        if (std::find(known.begin(), known.end(), name) == known.end()) {
          const std::string hint = did_you_mean(name, known);
          fail(item.source(), "unknown section '" + name + "'" +
                                  (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
        }
        s.sections.push_back(name);
      }
    } else {
      s.sections = {"io", "history", "prefill", "pipeline", "boundaries", "flops"};
    }
    read_scaling(root, s);
    read_training(root, s);
    if (s.training && !root.get("sections")) s.sections.push_back("training");
    if (!s.training &&
        std::find(s.sections.begin(), s.sections.end(), "training") != s.sections.end()) {
      fail(root.get("sections")->source(), "section 'training' needs a [train] table");
    }
    const bool only_scaling =
        std::all_of(s.sections.begin(), s.sections.end(), [](const std::string& x) {
          return x == "scaling" || x == "training" || x == "calibration";
        });
    const toml::table* model = table(root, "model");
    if (!model) {
      if (only_scaling && !root.get("sweep")) return s;
      fail(root.source(),
           "missing table [model] (sublayers or layers, d_model, blocks or block_size)");
    }
    s.has_model = true;
    CostInputs& in = s.inputs;
    // The integer inputs come from the one table of cost inputs (cost_input_fields.hpp).
    std::vector<std::string> model_keys = cost_input_keys("model");
    model_keys.push_back("block_sizes");
    check_keys(*model, "model.", model_keys);
    read_inputs(*model, "model", in);
    if (const toml::node* n = model->get("block_sizes")) {
      if (!n->is_array()) fail(n->source(), "model.block_sizes must be an array of integers");
      for (const auto& item : *n->as_array())
        in.block_sizes.push_back(integer(item, "model.block_sizes entry"));
      locations_["block_sizes"] = n->source();
    }
    model_region_ = model->source();
    if (const toml::table* sequence = table(root, "sequence")) {
      std::vector<std::string> keys = cost_input_keys("sequence");
      keys.push_back("dtype");
      check_keys(*sequence, "sequence.", keys);
      read_inputs(*sequence, "sequence", in);
      if (const toml::node* n = sequence->get("dtype")) {
        try {
          in.dtype = parse_dtype(string(*n, "sequence.dtype"), "sequence.dtype");
        } catch (const Error& error) {
          fail(n->source(), error.what());
        }
      }
    }
    if (const toml::table* parallel = table(root, "parallel")) {
      check_keys(*parallel, "parallel.", cost_input_keys("parallel"));
      read_inputs(*parallel, "parallel", in);
    }
    try {
      in = resolve_cost_inputs(in);
    } catch (const CostInputError& error) {
      auto it = locations_.find(error.field);
      fail(it != locations_.end() ? it->second : model_region_, error.what());
    }

    read_hardware(root, s);
    read_moe(root, s);
    read_pipeline(root, s);
    if (!root.get("sections")) {
      if (s.hardware) s.sections.push_back("time");
      if (s.pipeline) s.sections.push_back("pipeline_sim");
    }
    for (const auto& section : s.sections) {
      const bool needs_hardware =
          section == "time" || section == "strategies" || section == "decode";
      if ((needs_hardware && !s.hardware) || (section == "pipeline_sim" && !s.pipeline)) {
        fail(root.get("sections")->source(),
             "section '" + section + "' needs " +
                 (needs_hardware ? "[hardware]" : "a [pipeline] table"));
      }
    }
    if (const toml::node* n = root.get("sweep")) {
      if (!n->is_array_of_tables()) fail(n->source(), "sweep must be written as [[sweep]] tables");
      std::set<std::string> names;
      for (const auto& item : *n->as_array())
        s.sweeps.push_back(read_sweep(*item.as_table(), s, names));
    }
    return s;
  }

  void read_scaling(const toml::table& root, Scenario& s) const {
    const toml::table* scaling = table(root, "scaling");
    if (!scaling) return;
    check_keys(*scaling, "scaling.", {"target_loss", "loss_range"});
    if (const toml::node* n = scaling->get("target_loss")) {
      s.scaling.target_loss = number(*n, "scaling.target_loss");
      if (!(s.scaling.target_loss > 0)) fail(n->source(), "scaling.target_loss must be > 0");
    }
    if (const toml::node* n = scaling->get("loss_range")) {
      if (!n->is_array() || n->as_array()->size() != 2) {
        fail(n->source(), "scaling.loss_range must be [low, high]");
      }
      s.scaling.loss_from = number(*n->as_array()->get(0), "scaling.loss_range[0]");
      s.scaling.loss_to = number(*n->as_array()->get(1), "scaling.loss_range[1]");
      if (!(0 < s.scaling.loss_from && s.scaling.loss_from < s.scaling.loss_to)) {
        fail(n->source(), "scaling.loss_range must satisfy 0 < low < high");
      }
    }
  }

  void read_hardware(const toml::table& root, Scenario& s) const {
    const toml::table* hw = table(root, "hardware");
    if (!hw) return;
    const toml::node* preset = hw->get("preset");
    const toml::node* file = hw->get("file");
    if (preset && file) {
      fail(file->source(), "[hardware] takes preset or file, not both");
    }
    // This table's keys layered over the preset's or the file's (or alone): each error points
    // into the file that holds the key (hardware_reader.hpp).
    toml::table base;
    std::vector<detail::HardwareLayer> layers = {{hw, "hardware.", {"preset", "file"}}};
    try {
      if (preset) {
        const std::string name = string(*preset, "hardware.preset");
        base = detail::TomlReader("preset " + name).parse(hardware_preset_text(name));
      } else if (file) {
        std::filesystem::path path = string(*file, "hardware.file");
        if (path.is_relative()) path = std::filesystem::path(source()).parent_path() / path;
        base = detail::TomlReader(path.string()).parse(read_file(path));
      }
    } catch (const Error& error) {
      const std::string message = error.what();
      // A syntax error inside the file already names its place; a missing file or preset does not.
      if (file && message.find("TOML syntax error") != std::string::npos) throw;
      fail((preset ? preset : file)->source(), message);
    }
    if (preset || file) layers.push_back({&base, "", {}});
    s.hardware = detail::read_hardware_layers(*this, layers, "hardware");
  }

  void read_training(const toml::table& root, Scenario& s) const {
    const toml::table* train = table(root, "train");
    if (!train) return;
    check_keys(
        *train, "train.",
        {"data", "layers", "d_model", "heads", "kv_heads", "ffn", "schemes", "blocks", "steps",
         "seq", "batch", "lr", "seeds", "eval_every", "threads", "save_models", "masks"});
    ScenarioTraining t;
    const toml::node* data = train->get("data");
    if (!data)
      fail(train->source(),
           "[train] needs 'data': a text file to train on (relative to this scenario file)");
    t.data = string(*data, "train.data");
    t.data_path = std::filesystem::path(source()).parent_path() / t.data;
    auto bounded = [&](const char* key, int& out, std::int64_t lowest, std::int64_t highest) {
      if (const toml::node* n = train->get(key)) {
        const std::int64_t value = integer(*n, std::string("train.") + key);
        if (value < lowest || value > highest) {
          fail(n->source(), std::string("train.") + key + " must be between " +
                                std::to_string(lowest) + " and " + std::to_string(highest) +
                                ", got " + std::to_string(value));
        }
        out = static_cast<int>(value);
      }
    };
    bounded("layers", t.layers, 1, 64);
    bounded("d_model", t.d_model, 2, 4096);
    bounded("heads", t.heads, 1, 256);
    bounded("kv_heads", t.kv_heads, 0, 256);
    bounded("ffn", t.ffn, 0, 65536);
    bounded("steps", t.steps, 1, 10'000'000);
    bounded("seq", t.seq, 2, 65536);
    bounded("batch", t.batch, 1, 4096);
    bounded("eval_every", t.eval_every, 0, 10'000'000);
    bounded("threads", t.threads, 0, 1024);
    if (const toml::node* n = train->get("lr")) {
      t.lr = number(*n, "train.lr");
      if (!(t.lr > 0.0 && t.lr < 10.0))
        fail(n->source(), "train.lr must be a positive number below 10");
    }
    if (const toml::node* n = train->get("save_models"))
      t.save_models = boolean(*n, "train.save_models");
    const toml::node* schemes_node = train->get("schemes");
    if (schemes_node) {
      if (!schemes_node->is_array())
        fail(schemes_node->source(),
             "train.schemes must be an array of scheme names such as \"standard\", \"full\", "
             "\"block:block_size=4\"");
      t.schemes.clear();
      for (const auto& item : *schemes_node->as_array())
        t.schemes.push_back(string(item, "train.schemes entry"));
    }
    const int L = t.sublayers();
    if (const toml::node* n = train->get("blocks")) {
      if (!n->is_array()) fail(n->source(), "train.blocks must be an array of block counts N");
      for (const auto& item : *n->as_array()) {
        const std::int64_t blocks = integer(item, "train.blocks entry");
        if (blocks < 1 || blocks > L || L % blocks != 0) {
          fail(item.source(), "train.blocks entry " + std::to_string(blocks) + " must divide L = " +
                                  std::to_string(L) + " sublayers (2 x train.layers)");
        }
        t.blocks.push_back(static_cast<int>(blocks));
      }
    }
    if (t.schemes.empty() && t.blocks.empty())
      fail(train->source(), "[train] has no schemes and no blocks to train");
    if (schemes_node) {
      std::size_t index = 0;
      for (const auto& item : *schemes_node->as_array()) {
        try {
          t.scheme_of(t.schemes[index++]);
        } catch (const Error& error) {
          fail(item.source(), error.what());
        }
      }
    }
    if (const toml::node* n = train->get("masks")) {
      if (!n->is_array())
        fail(n->source(),
             "train.masks must be an array of masks such as \"embedding\", \"distant:2\"");
      for (const auto& item : *n->as_array()) {
        const std::string mask = string(item, "train.masks entry");
        try {
          parse_mask_selection(mask, "train.masks");
        } catch (const Error& error) {
          fail(item.source(), error.what());
        }
        t.masks.push_back(mask);
      }
    }
    if (const toml::node* n = train->get("seeds")) {
      if (!n->is_array() || n->as_array()->empty())
        fail(n->source(), "train.seeds must be a non-empty array of integers");
      t.seeds.clear();
      for (const auto& item : *n->as_array()) {
        const std::int64_t seed = integer(item, "train.seeds entry");
        if (seed < 0) fail(item.source(), "train.seeds entries must be >= 0");
        t.seeds.push_back(static_cast<std::uint64_t>(seed));
      }
    }
    if (t.d_model % t.heads != 0 || (t.d_model / t.heads) % 2 != 0) {
      fail(train->source(), "[train]: heads (" + std::to_string(t.heads) +
                                ") must divide d_model (" + std::to_string(t.d_model) +
                                ") into an even head size (RoPE)");
    }
    if (t.kv_heads > 0 && t.heads % t.kv_heads != 0)
      fail(train->source(), "[train]: kv_heads must divide heads");
    s.training = t;
  }

  void read_implementation(const toml::table& root, Scenario& s) const {
    if (const toml::table* impl = table(root, "implementation")) {
      check_keys(*impl, "implementation.", {"strategy", "mode"});
      if (const toml::node* n = impl->get("strategy")) {
        try {
          s.strategy =
              parse_strategy(string(*n, "implementation.strategy"), "implementation.strategy");
        } catch (const Error& error) {
          fail(n->source(), error.what());
        }
      }
      if (const toml::node* n = impl->get("mode")) {
        const std::string mode = string(*n, "implementation.mode");
        if (mode != "block" && mode != "full")
          fail(n->source(),
               "implementation.mode: expected \"block\" or \"full\", got \"" + mode + "\"");
        s.strategy_mode = mode == "full" ? ResidualMode::full : ResidualMode::block;
      }
    }
    if (const toml::table* calibration = table(root, "calibration")) {
      check_keys(*calibration, "calibration.", {"table"});
      if (const toml::node* n = calibration->get("table")) {
        std::filesystem::path path = string(*n, "calibration.table");
        if (path.is_relative()) path = std::filesystem::path(source()).parent_path() / path;
        s.calibration_table = path;
      }
    }
  }

  void read_moe(const toml::table& root, Scenario& s) const {
    const toml::table* moe = table(root, "moe");
    if (!moe) return;
    check_keys(*moe, "moe.", {"experts", "active", "shared", "expert_ffn"});
    // Structure here (the three sizes are required in [moe]); the value rules are the core's.
    auto read = [&](const char* key, std::int64_t& out, bool required_key) {
      const toml::node* node = moe->get(key);
      if (!node) {
        if (required_key) fail(moe->source(), std::string("[moe] needs '") + key + "'");
        return;
      }
      out = integer(*node, std::string("moe.") + key);
    };
    read("experts", s.moe.experts, true);
    read("active", s.moe.active, true);
    read("expert_ffn", s.moe.expert_ffn, true);
    read("shared", s.moe.shared, false);
    if (s.moe.experts < 1)
      fail(moe->get("experts")->source(),
           "moe.experts must be >= 1 (leave [moe] out for a dense MLP)");
    if (const auto problem = moe_problem(s.moe)) {
      const toml::node* node = moe->get(problem->field);
      fail(node ? node->source() : moe->source(),
           "moe." + problem->field + ": " + problem->message);
    }
  }

  void read_pipeline(const toml::table& root, Scenario& s) const {
    const toml::table* pipe = table(root, "pipeline");
    if (!pipe) return;
    check_keys(*pipe, "pipeline.",
               {"microbatches", "schedule", "cache", "mode", "overlap", "ideal_links", "link",
                "link_bandwidth"});
    PipelineSettings p;
    p.schedule = default_pipeline_schedule(s.inputs.vpp);
    if (const toml::node* n = pipe->get("microbatches")) {
      const std::int64_t m = integer(*n, "pipeline.microbatches");
      // Its range is the core's rule (pipeline_settings_problem, below); only the int conversion
      // here.
      p.microbatches = static_cast<int>(std::clamp<std::int64_t>(m, std::numeric_limits<int>::min(),
                                                                 std::numeric_limits<int>::max()));
    }
    auto choice = [&](const char* key, auto parse) {
      const toml::node* n = pipe->get(key);
      if (!n) return;
      try {
        parse(string(*n, std::string("pipeline.") + key));
      } catch (const Error& error) {
        fail(n->source(), error.what());
      }
    };
    choice("schedule", [&](const std::string& t) {
      p.schedule = parse_pipeline_schedule(t, "pipeline.schedule");
    });
    choice("cache",
           [&](const std::string& t) { p.cache = parse_cache_policy(t, "pipeline.cache"); });
    choice("mode", [&](const std::string& t) { p.mode = parse_residual_mode(t, "pipeline.mode"); });
    choice("link", [&](const std::string& t) {
      if (t != "scale_out" && t != "intra_node")
        throw Error("pipeline.link must be \"scale_out\" or \"intra_node\"");
      p.intra_node_link = t == "intra_node";
    });
    if (const toml::node* n = pipe->get("overlap")) p.overlap = boolean(*n, "pipeline.overlap");
    if (const toml::node* n = pipe->get("ideal_links"))
      p.ideal_links = boolean(*n, "pipeline.ideal_links");
    if (const toml::node* n = pipe->get("link_bandwidth")) {
      p.link_bandwidth = number(*n, "pipeline.link_bandwidth");
      if (!(p.link_bandwidth > 0))
        fail(n->source(),
             "pipeline.link_bandwidth must be > 0 bytes/s (or set ideal_links = true)");
    }
    p.model = s.inputs;
    p.moe = s.moe;
    if (const auto problem = pipeline_settings_problem(p)) {
      const toml::node* node = pipe->get(problem->field);
      fail(node ? node->source() : pipe->source(),
           "pipeline." + problem->field + ": " + problem->message);
    }
    if (!s.hardware) {
      fail(pipe->source(), "[pipeline] needs [hardware]: chunk times come from its roofline model");
    }
    p.hardware = *s.hardware;
    p.record_timeline = false;
    try {
      evaluate_pipeline(p);
    } catch (const Error& error) {
      fail(pipe->source(), error.what());
    }
    s.pipeline = p;
  }

  SweepSpec read_sweep(const toml::table& t, const Scenario& s,
                       std::set<std::string>& names) const {
    check_keys(t, "sweep.",
               {"name", "title", "x", "values", "y", "y_values", "metrics", "log_x", "log_y",
                "overlay", "threshold", "claim", "max_points"});
    SweepSpec spec;
    auto required = [&](const char* key) -> const toml::node& {
      const toml::node* node = t.get(key);
      if (!node) fail(t.source(), std::string("[[sweep]] needs '") + key + "'");
      return *node;
    };
    const toml::node& name = required("name");
    spec.name = string(name, "sweep.name");
    if (spec.name.empty() ||
        spec.name.find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
            std::string::npos) {
      fail(name.source(), "sweep.name must be letters, digits, '_' or '-' (it names files), got '" +
                              spec.name + "'");
    }
    if (!names.insert(spec.name).second)
      fail(name.source(), "duplicate sweep name '" + spec.name + "'");
    if (const toml::node* n = t.get("title")) spec.title = string(*n, "sweep.title");
    auto parameter = [&](const toml::node& node, const char* what) {
      std::string p = string(node, what);
      const std::string problem = sweep_parameter_problem(p, s.pipeline.has_value());
      if (!problem.empty()) fail(node.source(), std::string(what) + ": " + problem);
      return p;
    };
    spec.x.parameter = parameter(required("x"), "sweep.x");
    spec.x.values = axis_values(required("values"), "sweep.values", s);
    if (const toml::node* y = t.get("y")) {
      SweepAxis axis;
      axis.parameter = parameter(*y, "sweep.y");
      const toml::node* values = t.get("y_values");
      if (!values) fail(y->source(), "sweep.y needs sweep.y_values");
      axis.values = axis_values(*values, "sweep.y_values", s);
      if (axis.parameter == spec.x.parameter) fail(y->source(), "sweep.y must differ from sweep.x");
      spec.y = axis;
    } else if (const toml::node* values = t.get("y_values")) {
      fail(values->source(), "sweep.y_values given without sweep.y");
    }
    const std::int64_t settings = static_cast<std::int64_t>(spec.x.values.size()) *
                                  static_cast<std::int64_t>(spec.y ? spec.y->values.size() : 1);
    if (const toml::node* n = t.get("max_points")) {
      const std::int64_t limit = integer(*n, "sweep.max_points");
      if (limit < 1)
        fail(n->source(), "sweep.max_points must be >= 1, got " + std::to_string(limit));
      spec.max_points = static_cast<std::size_t>(limit);
    }
    if (settings > static_cast<std::int64_t>(spec.max_points)) {
      fail(t.source(), "sweep '" + spec.name + "' has " + std::to_string(settings) +
                           " settings, more than the limit of " + std::to_string(spec.max_points) +
                           " (raise it with max_points = N in this [[sweep]])");
    }
    const toml::node& metrics = required("metrics");
    if (!metrics.is_array() || metrics.as_array()->empty()) {
      fail(metrics.source(), "sweep.metrics must be a non-empty array of metric names");
    }
    std::string unit;
    for (const auto& item : *metrics.as_array()) {
      const std::string key = string(item, "sweep.metrics entry");
      const std::string problem =
          sweep_metric_problem(key, s.hardware.has_value(), s.pipeline.has_value(), unit);
      if (!problem.empty()) fail(item.source(), problem);
      const CostMetric* metric = find_cost_metric(key);
      if (unit.empty()) unit = metric->unit;
      spec.metrics.push_back(key);
    }
    if (const toml::node* n = t.get("threshold")) spec.threshold = number(*n, "sweep.threshold");
    if (const toml::node* n = t.get("claim")) {
      spec.claim = string(*n, "sweep.claim");
      if (std::isnan(spec.threshold)) fail(n->source(), "sweep.claim needs sweep.threshold");
    }
    if (const toml::node* n = t.get("log_x")) spec.log_x = boolean(*n, "sweep.log_x");
    if (const toml::node* n = t.get("log_y")) spec.log_y = boolean(*n, "sweep.log_y");
    if (const toml::node* n = t.get("overlay")) {
      spec.overlay = string(*n, "sweep.overlay");
      if (spec.overlay != "paper_fig6") fail(n->source(), "sweep.overlay must be \"paper_fig6\"");
      if (spec.x.parameter != "blocks" && spec.x.parameter != "block_size") {
        fail(n->source(), "overlay \"paper_fig6\" needs x = \"blocks\" or \"block_size\"");
      }
    }
    return spec;
  }

 private:
  std::map<std::string, toml::source_region> locations_;
  toml::source_region model_region_;
};

}  // namespace

Scenario parse_scenario(const std::string& text, const std::string& source) {
  ScenarioReader reader(source);
  const toml::table root = reader.parse(text);
  Scenario scenario = reader.read(root);
  scenario.text = text;
  return scenario;
}

namespace {

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// The shortest text that reads back to the same double (1.695, not 1.6950000000000001).
std::string toml_number(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

std::string values_array(const std::vector<std::int64_t>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i)
    out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

}  // namespace

std::string scenario_to_toml(const Scenario& s) {
  std::ostringstream out;
  out << "# Written by AttnRes Lab.\n";
  if (!s.title.empty()) out << "title = " << quoted(s.title) << "\n";
  if (!s.description.empty()) out << "description = " << quoted(s.description) << "\n";
  if (!s.model_source.empty()) out << "source = " << quoted(s.model_source) << "\n";
  out << "sections = [";
  for (std::size_t i = 0; i < s.sections.size(); ++i)
    out << (i ? ", " : "") << quoted(s.sections[i]);
  out << "]\n";
  if (s.has_model) {
    // Every primary input of the one table, in its TOML table (derived aliases are left out).
    const CostInputs& in = s.inputs;
    for (const char* section : {"model", "sequence", "parallel"}) {
      out << "\n[" << section << "]\n";
      for (const auto& field : cost_input_fields()) {
        if (field.section == section && !field.derived)
          out << field.key << " = " << in.*field.member << "\n";
      }
      if (std::string_view(section) == "model" && !in.block_sizes.empty()) {
        out << "block_sizes = [";
        for (std::size_t i = 0; i < in.block_sizes.size(); ++i)
          out << (i ? ", " : "") << in.block_sizes[i];
        out << "]\n";
      }
      if (std::string_view(section) == "sequence")
        out << "dtype = " << quoted(to_string(in.dtype)) << "\n";
    }
  }
  out << "\n[implementation]\nstrategy = " << quoted(to_string(s.strategy))
      << "\nmode = " << quoted(to_string(s.strategy_mode)) << "\n";
  if (!s.calibration_table.empty())
    out << "\n[calibration]\ntable = " << quoted(s.calibration_table.string()) << "\n";
  out << "\n[scaling]\ntarget_loss = " << toml_number(s.scaling.target_loss) << "\nloss_range = ["
      << toml_number(s.scaling.loss_from) << ", " << toml_number(s.scaling.loss_to) << "]\n";
  if (s.hardware) {
    // In full (a preset name would lose overrides).
    const Hardware& hw = *s.hardware;
    out << "\n[hardware]\nname = " << quoted(hw.name) << "\nsource = " << quoted(hw.source)
        << "\npeak_bf16_flops = " << toml_number(hw.peak_flops)
        << "\nhbm_bandwidth = " << toml_number(hw.hbm_bandwidth)
        << "\nintra_node_bandwidth = " << toml_number(hw.intra_node_bandwidth)
        << "\nscale_out_bandwidth = " << toml_number(hw.scale_out_bandwidth)
        << "\nlink_latency = " << toml_number(hw.link_latency)
        << "\nkernel_floor = " << toml_number(hw.kernel_floor)
        << "\ngpus_per_node = " << hw.gpus_per_node
        << "\nefficiency = { compute = " << toml_number(hw.compute_efficiency)
        << ", memory = " << toml_number(hw.memory_efficiency)
        << ", link = " << toml_number(hw.link_efficiency) << " }\n";
  }
  if (s.training) {
    const ScenarioTraining& t = *s.training;
    auto list = [](const auto& values) {
      std::ostringstream text;
      text << "[";
      for (std::size_t i = 0; i < values.size(); ++i) text << (i ? ", " : "") << values[i];
      return text.str() + "]";
    };
    std::vector<std::string> schemes;
    for (const auto& scheme : t.schemes) schemes.push_back(quoted(scheme));
    out << "\n[train]\ndata = " << quoted(t.data) << "\nlayers = " << t.layers
        << "\nd_model = " << t.d_model << "\nheads = " << t.heads << "\nkv_heads = " << t.kv_heads
        << "\nffn = " << t.ffn << "\nschemes = " << list(schemes) << "\nblocks = " << list(t.blocks)
        << "\nsteps = " << t.steps << "\nseq = " << t.seq << "\nbatch = " << t.batch
        << "\nlr = " << toml_number(t.lr) << "\nseeds = " << list(t.seeds)
        << "\neval_every = " << t.eval_every << "\nthreads = " << t.threads
        << "\nsave_models = " << (t.save_models ? "true" : "false") << "\n";
    std::vector<std::string> masks;
    for (const auto& mask : t.masks) masks.push_back(quoted(mask));
    if (!masks.empty()) out << "masks = " << list(masks) << "\n";
  }
  if (s.moe.experts > 0) {
    out << "\n[moe]\nexperts = " << s.moe.experts << "\nactive = " << s.moe.active
        << "\nshared = " << s.moe.shared << "\nexpert_ffn = " << s.moe.expert_ffn << "\n";
  }
  if (s.pipeline) {
    const PipelineSettings& p = *s.pipeline;
    out << "\n[pipeline]\nmicrobatches = " << p.microbatches
        << "\nschedule = " << quoted(to_string(p.schedule))
        << "\ncache = " << quoted(to_string(p.cache)) << "\nmode = " << quoted(to_string(p.mode))
        << "\noverlap = " << (p.overlap ? "true" : "false")
        << "\nideal_links = " << (p.ideal_links ? "true" : "false")
        << "\nlink = " << quoted(p.intra_node_link ? "intra_node" : "scale_out") << "\n";
    if (p.link_bandwidth > 0) out << "link_bandwidth = " << toml_number(p.link_bandwidth) << "\n";
  }
  for (const auto& sweep : s.sweeps) {
    out << "\n[[sweep]]\nname = " << quoted(sweep.name) << "\n";
    if (!sweep.title.empty()) out << "title = " << quoted(sweep.title) << "\n";
    out << "x = " << quoted(sweep.x.parameter) << "\nvalues = " << values_array(sweep.x.values)
        << "\n";
    if (sweep.y)
      out << "y = " << quoted(sweep.y->parameter)
          << "\ny_values = " << values_array(sweep.y->values) << "\n";
    out << "metrics = [";
    for (std::size_t i = 0; i < sweep.metrics.size(); ++i)
      out << (i ? ", " : "") << quoted(sweep.metrics[i]);
    out << "]\nlog_x = " << (sweep.log_x ? "true" : "false")
        << "\nlog_y = " << (sweep.log_y ? "true" : "false") << "\n";
    if (!sweep.overlay.empty()) out << "overlay = " << quoted(sweep.overlay) << "\n";
    if (!std::isnan(sweep.threshold)) out << "threshold = " << toml_number(sweep.threshold) << "\n";
    if (!sweep.claim.empty()) out << "claim = " << quoted(sweep.claim) << "\n";
    if (sweep.max_points != SweepSpec::kDefaultMaxSweepPoints)
      out << "max_points = " << sweep.max_points << "\n";
  }
  return out.str();
}

Scenario load_scenario(const std::filesystem::path& path) {
  return parse_scenario(read_file(path), path.string());
}

}  // namespace attnres

// attnres animate: the depth-attention map (the GUI's Depth attention view: alpha_heatmap of
// report/model_charts.hpp, one forward trace per frame) animated for slides, as frame files
// frame_NNN.png / .svg, frames.json (each frame's setting and numbers, schema attnres.animate),
// index.md and, when giflib was found at configure time, animation.gif.
//
//   --sweep query-std   the pseudo-queries' std from --from to --to (default 0 .. 2, 21 frames):
//                       rows sharpen from the plain mean 1/(r+1) to selective reads. The random
//                       lesson model is drawn at each std (random_model, as the GUI's lesson model
//                       does); a loaded model's pseudo-queries are scaled to that RMS.
//   --sweep block-size  Block AttnRes with S = 1 .. L on the same weights (forward --mode block
//                       --block-size S): S = 1 is Full AttnRes, columns merge into block summaries.
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "attnres/atomic_file.hpp"
#include "attnres/engine.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/model_charts.hpp"
#include "attnres/output_dir.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/token_ids.hpp"
#include "chart_render.hpp"
#include "cli.hpp"
#include "gif_export.hpp"
#include "heatmap_render.hpp"
#include "options.hpp"
#include "progress.hpp"

namespace attnres::cli {

namespace fs = std::filesystem;

namespace {

constexpr int kDefaultFrames = 21;
constexpr int kMaxFrames = 128;        // frames of either sweep (block-size: L at most this)
constexpr double kMaxQueryStd = 10.0;  // the GUI's query std field
constexpr int kMaxLayers = 64;         // the GUI's layers field
constexpr int kFrameWidth = 720, kFrameHeight = 600;  // render_heatmap_files' default size
constexpr const char* kLessonTokens = "1 7 42 7 99 3";

enum class Sweep { query_std, block_size };

// The GUI's random lesson model (app/gui/lesson_model.cpp): Full AttnRes, d = 64, 4 heads (2 kv),
// ffn 172, vocab 256; `layers` transformer layers.
ModelConfig lesson_random_config(int layers) {
  ModelConfig config;
  config.num_hidden_layers = layers;
  config.hidden_size = 64;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.intermediate_size = 172;
  config.vocab_size = 256;
  config.attn_res.mode = ResidualMode::full;
  return config;
}

// The RMS of every pseudo-query of the model (0 when it has none).
double query_rms(const ModelWeights<double>& model) {
  double sum = 0.0;
  Eigen::Index count = 0;
  for (int r = 0; r <= model.config.sublayers(); ++r) {
    const auto& query = model.depth_read(r).query;
    sum += query.squaredNorm();
    count += query.size();
  }
  return count > 0 ? std::sqrt(sum / static_cast<double>(count)) : 0.0;
}

// The model with every pseudo-query multiplied by `factor`.
ModelWeights<double> scaled_queries(const ModelWeights<double>& model, double factor) {
  ModelWeights<double> scaled = model;
  for (int r = 0; r <= scaled.config.sublayers(); ++r) scaled.depth_read(r).query *= factor;
  return scaled;
}

struct Frame {
  double query_std = std::numeric_limits<double>::quiet_NaN();  // the frame's (or the model's)
  int block_size = 0;                                           // S, block-size sweep only
  std::string scheme;                                           // the scheme that ran
  std::string stem;                                             // frame_NNN
  HeatmapSpec map;
};

std::string frame_stem(int index) {
  std::string digits = std::to_string(index);
  return "frame_" + std::string(digits.size() < 3 ? 3 - digits.size() : 0, '0') + digits;
}

// One frame: the GUI's Depth attention map (mean over tokens) of one forward pass at f64 on the
// fast engine (as the GUI's views run it).
Frame trace_frame(const ModelWeights<double>& model, const std::vector<int>& tokens,
                  const ForwardOptions& options, const std::string& setting) {
  ForwardOptions pass = options;
  pass.record_mixing = false;  // the map needs alpha only
  ForwardEngine<double> engine(model, EngineOptions{});
  const ForwardTrace trace = engine.forward(tokens, pass).trace;
  Frame frame;
  frame.scheme = trace.scheme.describe();
  frame.block_size = trace.mode == ResidualMode::block ? trace.block_size : 0;
  std::string label = frame.scheme;
  label += ", ";
  label += setting;
  frame.map = alpha_heatmap(trace, alpha_title(label, trace, -1, -1));
  return frame;
}

nlohmann::ordered_json number_or_null(double value) {
  if (std::isfinite(value)) return value;
  return nullptr;
}

nlohmann::ordered_json heatmap_json(const HeatmapSpec& map) {
  nlohmann::ordered_json values = nlohmann::ordered_json::array();
  for (const auto& row : map.values) {
    nlohmann::ordered_json cells = nlohmann::ordered_json::array();
    for (double value : row) cells.push_back(number_or_null(value));  // null: not a source
    values.push_back(std::move(cells));
  }
  return {{"title", map.title},
          {"row_labels", map.row_labels},
          {"column_labels", map.column_labels},
          {"values", values},
          {"low", map.low},
          {"high", map.high}};
}

struct Animation {
  Sweep sweep = Sweep::query_std;
  std::string model_dir;  // empty: the random lesson model
  ModelConfig config;     // the model's (the random model's before any conversion)
  RandomModelOptions random;
  std::vector<int> tokens;
  double from = 0.0, to = 2.0;
  int delay_ms = 500;
  double loaded_query_rms = 0.0;  // a loaded model's pseudo-query RMS (query-std sweep)
  std::vector<Frame> frames;
  bool gif = false;
};

std::string sweep_name(Sweep sweep) {
  return sweep == Sweep::query_std ? "query-std" : "block-size";
}

// "the random lesson model (Full AttnRes, L = 8 sublayers, d = 64, seed 1)" or "model DIR (...)".
std::string model_words(const Animation& a) {
  std::string words = a.model_dir.empty() ? "the random lesson model" : "model " + a.model_dir;
  words += " (";
  words += a.config.attn_res.describe();
  words += ", L = ";
  words += std::to_string(a.config.sublayers());
  words += " sublayers, d = ";
  words += std::to_string(a.config.hidden_size);
  if (a.model_dir.empty()) {
    words += ", seed ";
    words += std::to_string(a.random.seed);
  }
  words += ")";
  return words;
}

std::string tokens_text(const std::vector<int>& tokens) {
  std::string text;
  for (int id : tokens) {
    if (!text.empty()) text += ' ';
    text += std::to_string(id);
  }
  return text;
}

nlohmann::ordered_json animation_json(const Animation& a) {
  nlohmann::ordered_json inputs = {
      {"sweep", sweep_name(a.sweep)}, {"model", nullptr},
      {"random_model", nullptr},      {"tokens", a.tokens},
      {"frames", a.frames.size()},    {"from_query_std", nullptr},
      {"to_query_std", nullptr},      {"frame_delay_seconds", a.delay_ms / 1000.0}};
  if (!a.model_dir.empty()) {
    inputs["model"] = a.model_dir;
  } else {
    inputs["random_model"] = {
        {"layers", a.config.num_hidden_layers},      {"d_model", a.config.hidden_size},
        {"heads", a.config.num_attention_heads},     {"kv_heads", a.config.num_key_value_heads},
        {"ffn", a.config.intermediate_size},         {"vocab", a.config.vocab_size},
        {"mode", to_string(a.config.attn_res.mode)}, {"seed", a.random.seed},
        {"weight_std", a.random.weight_std},         {"query_std", nullptr}};
    if (a.sweep == Sweep::block_size) inputs["random_model"]["query_std"] = a.random.query_std;
  }
  if (a.sweep == Sweep::query_std) {
    inputs["from_query_std"] = a.from;
    inputs["to_query_std"] = a.to;
  }
  std::string queries;
  if (a.sweep == Sweep::query_std) {
    queries = a.model_dir.empty()
                  ? "random_model: the random model drawn with each frame's query std"
                  : "scaled: the model's pseudo-queries multiplied by query_std / " +
                        format_number(a.loaded_query_rms) + " (their RMS)";
  }
  nlohmann::ordered_json frames = nlohmann::ordered_json::array();
  for (std::size_t k = 0; k < a.frames.size(); ++k) {
    const Frame& f = a.frames[k];
    nlohmann::ordered_json block_size = nullptr, blocks = nullptr;
    if (f.block_size > 0) {
      block_size = f.block_size;
      blocks = (a.config.sublayers() + f.block_size - 1) / f.block_size;
    }
    frames.push_back({{"index", k},
                      {"query_std", number_or_null(f.query_std)},
                      {"block_size", block_size},
                      {"blocks", blocks},
                      {"scheme", f.scheme},
                      {"png", f.stem + ".png"},
                      {"svg", f.stem + ".svg"},
                      {"heatmap", heatmap_json(f.map)}});
  }
  return {{"schema", schema_tag("animate")},
          {"inputs", inputs},
          {"sublayers", a.config.sublayers()},
          {"queries", a.sweep == Sweep::query_std ? nlohmann::ordered_json(queries) : nullptr},
          {"width_pixels", kFrameWidth},
          {"height_pixels", kFrameHeight},
          {"animation", a.gif ? nlohmann::ordered_json("animation.gif") : nullptr},
          {"frames", frames}};
}

std::string index_markdown(const Animation& a) {
  std::string md = "# Depth attention, ";
  md += a.sweep == Sweep::query_std
            ? "query std " + format_number(a.from) + " to " + format_number(a.to)
            : std::string("Block AttnRes S = 1 to L");
  md += " (attnres animate)\n\n";
  md +=
      "The mean depth-attention weights alpha of every read (rows: the input of each sublayer, "
      "then the final read) over its sources (columns), as the GUI's Depth attention view draws "
      "them (docs/math.md §2.2-2.3), for ";
  md += model_words(a);
  md += " on the tokens ";
  md += tokens_text(a.tokens);
  md += ". ";
  if (a.sweep == Sweep::query_std) {
    md +=
        "At query std 0 every read is the plain mean of its sources (each row uniform, "
        "1/(r+1)); as the pseudo-queries grow the rows turn sharp and selective. ";
    md += a.model_dir.empty() ? "Each frame is the random model drawn with that query std."
                              : "Each frame scales the model's pseudo-queries to that RMS.";
  } else {
    md +=
        "S = 1 is Full AttnRes exactly; as S grows the outputs merge into block summaries b_n "
        "and the partial sum of the current block; at S = L one block and the partial sum are "
        "left beside the embedding. Every frame runs the same weights.";
  }
  md += " Each frame's numbers are in frames.json.\n\n";
  if (a.gif) {
    md += "![animation](animation.gif)\n\n";
  } else {
    md += "(No animation.gif: this attnres was built without giflib.)\n\n";
  }
  md += a.sweep == Sweep::query_std
            ? "| frame | query std | scheme | files |\n|---:|---:|---|---|\n"
            : "| frame | S | N | files |\n|---:|---:|---:|---|\n";
  for (std::size_t k = 0; k < a.frames.size(); ++k) {
    const Frame& f = a.frames[k];
    md += "| " + std::to_string(k) + " | ";
    if (a.sweep == Sweep::query_std) {
      md += format_number(f.query_std);
      md += " | ";
      md += f.scheme;
    } else {
      md += std::to_string(f.block_size);
      md += " | ";
      md += std::to_string((a.config.sublayers() + f.block_size - 1) / f.block_size);
    }
    md += " | [PNG](" + f.stem + ".png), [SVG](" + f.stem + ".svg) |\n";
  }
  return md;
}

}  // namespace

int animate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  std::string sweep_text, model_dir, tokens_flag, out_dir;
  int frames = kDefaultFrames, layers = 4, delay_ms = 500;
  double from = 0.0, to = 2.0, query_std = 0.5;
  std::uint64_t seed = 1;
  po::options_description options = command_options("animate");
  options.add_options()(
      "sweep", po::value(&sweep_text)->required(),
      "query-std: the pseudo-queries' std from --from to --to (rows sharpen from the plain mean "
      "to selective reads); block-size: Block AttnRes with S = 1 .. L on the same weights, one "
      "frame per S (columns merge into block summaries)")(
      "model", po::value(&model_dir),
      "model directory (config.json + model.safetensors); default: the GUI's random lesson model "
      "(Full AttnRes, 4 layers, d = 64, 4 heads (2 kv), ffn 172, vocab 256)")(
      "tokens", po::value(&tokens_flag)->default_value(kLessonTokens),
      "token ids, separated by spaces or commas")(
      "frames", po::value(&frames)->default_value(kDefaultFrames),
      "query-std: frames from --from to --to, evenly spaced (2 .. 128)")(
      "from", po::value(&from)->default_value(0.0), "query-std: the first frame's query std")(
      "to", po::value(&to)->default_value(2.0),
      "query-std: the last frame's query std (above --from, at most 10)")(
      "query-std", po::value(&query_std)->default_value(0.5),
      "block-size on the random model: its query std (the GUI's default 0.5)")(
      "seed", po::value(&seed)->default_value(1), "the random model's seed")(
      "layers", po::value(&layers)->default_value(4),
      "the random model's transformer layers (L = 2 x layers sublayers; 1 .. 64)")(
      "delay-ms", po::value(&delay_ms)->default_value(500),
      "how long animation.gif shows each frame, in milliseconds (20 .. 10000)")(
      "out", po::value(&out_dir)->required(),
      "output directory: new, empty, or written by attnres (see --force)")(
      "force", "replace the contents of an --out directory that holds other files");
  po::variables_map values;
  if (parse_or_help(
          args, options, values, out,
          "usage: attnres animate --sweep query-std|block-size [--model DIR | --seed K --layers N] "
          "[--query-std s] [--tokens \"IDS\"] [--frames K] [--from A] [--to B] [--delay-ms MS] "
          "--out DIR [--force]\n"
          "The depth-attention map of the GUI's Depth attention view, animated for slides:\n"
          "frame_000.png/.svg ... (720 x 600), frames.json (each frame's setting and numbers,\n"
          "schema attnres.animate), index.md, and animation.gif (looping; written when attnres "
          "was\n"
          "built with giflib, Debian's libgif-dev, and otherwise left out with a note).\n"
          "query-std: the random model is drawn at each std, as the GUI's query std field draws "
          "it\n"
          "(for std > 0 only the queries change between frames); a --model keeps its weights and\n"
          "its pseudo-queries are scaled so that their RMS is the frame's std (it needs static\n"
          "queries that are not all zero). block-size: every S = 1 .. L, L frames (an S that does\n"
          "not divide L leaves a shorter last block), as forward --mode block --block-size S.")) {
    return kExitOk;
  }

  Animation a;
  require_either("--sweep", sweep_text, "query-std", "block-size");
  a.sweep = sweep_text == "query-std" ? Sweep::query_std : Sweep::block_size;
  const bool random = !values.count("model");
  if (a.sweep == Sweep::query_std) {
    if (given(values, "query-std")) {
      throw UsageError(
          "--query-std sets the random model of --sweep block-size; --sweep query-std "
          "runs from --from to --to");
    }
    if (frames < 2 || frames > kMaxFrames) {
      throw UsageError("--frames must be 2 .. " + std::to_string(kMaxFrames) + ", got " +
                       std::to_string(frames));
    }
    if (!(from >= 0.0) || !(to <= kMaxQueryStd) || !(from < to)) {
      throw UsageError(
          "--from and --to must satisfy 0 <= --from < --to <= " + format_number(kMaxQueryStd) +
          ", got --from " + format_number(from) + " --to " + format_number(to));
    }
  } else {
    for (const char* flag : {"frames", "from", "to"}) {
      if (given(values, flag)) {
        std::string message = "--";
        message += flag;
        message +=
            " applies to --sweep query-std; --sweep block-size draws one frame per S = 1 .. L";
        throw UsageError(message);
      }
    }
    if (!random && given(values, "query-std")) {
      throw UsageError("--query-std sets the random model's queries; a --model keeps its own");
    }
    if (!(query_std >= 0.0 && query_std <= kMaxQueryStd)) {
      throw UsageError("--query-std must be 0 .. " + format_number(kMaxQueryStd) + ", got " +
                       format_number(query_std));
    }
  }
  if (!random) {
    for (const char* flag : {"seed", "layers"}) {
      if (given(values, flag)) {
        std::string message = "--";
        message += flag;
        message += " shapes the random lesson model; leave it out with --model";
        throw UsageError(message);
      }
    }
  }
  if (layers < 1 || layers > kMaxLayers) {
    throw UsageError("--layers must be 1 .. " + std::to_string(kMaxLayers) + ", got " +
                     std::to_string(layers));
  }
  if (delay_ms < 20 || delay_ms > 10000) {
    throw UsageError("--delay-ms must be 20 .. 10000, got " + std::to_string(delay_ms));
  }
  a.from = from;
  a.to = to;
  a.delay_ms = delay_ms;
  const fs::path target = parse_flag_value([&] { return clean_output_path(out_dir, "--out"); });

  // The model: read before the output directory is looked at, so that a bad one leaves nothing.
  std::optional<ModelWeights<double>> loaded;
  if (random) {
    a.config = lesson_random_config(layers);
    a.random.seed = seed;
    a.random.query_std = query_std;
  } else {
    a.model_dir = model_dir;
    loaded = load_model(model_dir);
    a.config = loaded->config;
  }
  a.tokens = parse_flag_value(
      [&] { return parse_token_ids(tokens_flag, "--tokens", a.config.vocab_size); });
  const int L = a.config.sublayers();
  if (a.sweep == Sweep::block_size && L > kMaxFrames) {
    throw UsageError("--sweep block-size draws one frame per S = 1 .. L, and this model has L = " +
                     std::to_string(L) + " sublayers (at most " + std::to_string(kMaxFrames) +
                     " frames)");
  }
  if (a.sweep == Sweep::query_std && loaded) {
    const AttnResConfig& scheme = loaded->config.attn_res;
    if (!scheme.uses_query() || scheme.query_source != QuerySource::fixed) {
      std::string message =
          "--sweep query-std scales the pseudo-queries of Full or Block AttnRes, but the scheme "
          "of ";
      message += model_dir;
      message += " is ";
      message += scheme.describe();
      message += " (leave out --model for the random lesson model)";
      throw UsageError(message);
    }
    a.loaded_query_rms = query_rms(*loaded);
    if (!(a.loaded_query_rms > 0.0)) {
      throw UsageError("--sweep query-std scales the pseudo-queries of " + model_dir +
                       ", but they are all zero (leave out --model for the random lesson model)");
    }
  }

  OutputDirectoryOptions output;
  output.owner = "animate";
  output.force = values.count("force") > 0;
  if (!random) output.inputs = {fs::path(model_dir)};
  std::vector<std::string> notes = check_output_directory(target, output);  // before the work
  charts::ensure_application();  // before any staging folder exists
  a.gif = charts::gif_supported();

  // The weights every block-size frame reads.
  std::optional<ModelWeights<double>> base;
  if (a.sweep == Sweep::block_size) base = random ? random_model(a.config, a.random) : *loaded;

  ProgressBar progress("animate");
  const int count = a.sweep == Sweep::query_std ? frames : L;
  for (int k = 0; k < count; ++k) {
    report_progress(progress.callback(), static_cast<std::size_t>(k),
                    static_cast<std::size_t>(count), "animate");
    ForwardOptions pass;
    Frame frame;
    if (a.sweep == Sweep::query_std) {
      const double sigma = from + (to - from) * k / (count - 1);
      const std::string setting = "query std " + format_number(sigma);
      if (random) {
        RandomModelOptions drawn = a.random;
        drawn.query_std = sigma;
        frame = trace_frame(random_model(a.config, drawn), a.tokens, pass, setting);
      } else {
        frame = trace_frame(scaled_queries(*loaded, sigma / a.loaded_query_rms), a.tokens, pass,
                            setting);
      }
      frame.query_std = sigma;
    } else {
      const int S = k + 1;
      const std::string setting = "N = " + std::to_string((L + S - 1) / S) + " blocks";
      if (same_tensors(base->config.attn_res.mode, ResidualMode::block)) {
        pass.mode = ResidualMode::block;  // the same tensors read as Block (forward --mode block)
        pass.block_size = S;
        frame = trace_frame(*base, a.tokens, pass, setting);
      } else {
        AttnResConfig block;  // another scheme's tensors: converted (docs/schemes.md)
        block.mode = ResidualMode::block;
        block.block_size = S;
        block.key_norm_eps = base->config.attn_res.key_norm_eps;
        frame = trace_frame(convert_scheme(*base, block), a.tokens, pass, setting);
      }
      frame.query_std = random ? a.random.query_std : query_rms(*base);
    }
    frame.stem = frame_stem(k);
    frame.map.id = frame.stem;
    a.frames.push_back(std::move(frame));
  }

  progress.set_label("writing");
  output.progress = write_phase_progress(progress);
  const OutputDirectoryResult written =
      write_output_directory(target, output, [&](const fs::path& dir) {
        std::vector<fs::path> pngs;
        for (std::size_t k = 0; k < a.frames.size(); ++k) {
          const Frame& f = a.frames[k];
          charts::render_heatmap_files(f.map, dir / (f.stem + ".png"), dir / (f.stem + ".svg"),
                                       QSize(kFrameWidth, kFrameHeight));
          pngs.push_back(dir / (f.stem + ".png"));
          report_progress(progress.callback(), k + 1, a.frames.size(), "animate");
        }
        write_file_atomically(dir / "frames.json", animation_json(a).dump(1) + "\n");
        write_file_atomically(dir / "index.md", index_markdown(a));
        if (a.gif) {
          write_file_atomically(dir / "animation.gif",
                                charts::animated_gif(pngs, a.delay_ms, progress.callback()));
        }
      });

  out << "wrote " << printable_text(target.string()) << ": " << a.frames.size() << " frames "
      << a.frames.front().stem << " .. " << a.frames.back().stem << " (.png, .svg each, "
      << kFrameWidth << " x " << kFrameHeight << "), frames.json, index.md";
  if (a.gif) {
    out << ", animation.gif (" << format_number(a.delay_ms / 1000.0) << " s a frame)";
  }
  out << "\n  "
      << (a.sweep == Sweep::query_std
              ? "query std " + format_number(from) + " .. " + format_number(to)
              : "Block AttnRes S = 1 .. " + std::to_string(L))
      << " on " << model_words(a) << ", tokens " << tokens_text(a.tokens) << "\n";
  if (!a.gif) {
    out << "note: this attnres was built without giflib: no animation.gif (install libgif-dev "
           "and configure again)\n";
  }
  for (const auto& note : output_directory_notes(written)) notes.push_back(note);
  for (const auto& note : notes) out << "note: " << printable_text(note) << "\n";
  return kExitOk;
}

}  // namespace attnres::cli

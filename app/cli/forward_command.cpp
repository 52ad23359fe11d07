// attnres forward: a forward pass with a readable summary, and optional --dump / --trace files.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <ostream>
#include <unordered_map>

#include "attnres/assert.hpp"
#include "attnres/atomic_file.hpp"
#include "attnres/engine.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/forward.hpp"
#include "attnres/gradient_engine.hpp"
#include "attnres/mixing_analysis.hpp"
#include "attnres/model.hpp"
#include "attnres/model_charts.hpp"
#include "attnres/output_dir.hpp"
#include "attnres/token_ids.hpp"
#include "attnres/trace_io.hpp"
#include "attnres/training.hpp"
#include "chart_render.hpp"
#include "cli.hpp"
#include "heatmap_render.hpp"
#include "options.hpp"
#include "progress.hpp"
#include "text_table.hpp"

namespace attnres::cli {

namespace fs = std::filesystem;

namespace {

void require_parent_directory(const std::string& path, const std::string& flag) {
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent)) {
    throw UsageError(flag + " '" + path + "': directory '" + parent.string() + "' does not exist");
  }
}

template <typename Scalar>
void print_summary(std::ostream& out, const std::string& model_dir, const ModelConfig& config,
                   const ForwardResult<Scalar>& result, const std::string& precision) {
  const ForwardTrace& trace = result.trace;
  out << "model     " << printable_text(model_dir) << ": d = " << config.hidden_size << ", "
      << config.num_hidden_layers << " layers = L " << trace.sublayers << " sublayers, "
      << config.num_attention_heads << " heads (" << config.num_key_value_heads << " kv), ffn "
      << config.intermediate_size << ", vocab " << config.vocab_size << "\n";
  out << "residual  ";
  switch (trace.mode) {
    case ResidualMode::standard:
      out << "standard (h_{l+1} = h_l + f_l(h_l))";
      break;
    case ResidualMode::full:
      out << "Full AttnRes (every read sees v_0 .. v_{l-1})";
      break;
    case ResidualMode::block: {
      const int blocks = (trace.sublayers + trace.block_size - 1) / trace.block_size;
      out << "Block AttnRes, S = " << trace.block_size << " sublayers per block, N = " << blocks
          << " blocks";
      if (trace.zero_placeholder) out << ", zero placeholder ON";
      break;
    }
    case ResidualMode::denseformer:
      out << "DenseFormer (learned weights over v_0 .. v_{l-1})";
      break;
    case ResidualMode::rescaled:
      out << "rescaled residual (the running mean of v_0 .. v_{l-1})";
      break;
    case ResidualMode::mhc:
      out << (trace.scheme.dynamic ? "mHC" : "static mHC") << ", m = " << trace.scheme.streams
          << " streams, " << trace.scheme.sinkhorn_iterations << " Sinkhorn iterations";
      break;
  }
  if (const std::string settings = trace.scheme.settings_label();
      !settings.empty() && trace.scheme.attention_mode()) {
    out << " [" << settings << "]";
  }
  if (trace.scheme.reads_sources()) {
    out << "; " << (trace.two_phase ? "two-phase" : "one-shot") << " reads";
    if (!trace.two_phase && !trace.scheme.two_phase_limit().empty()) {
      out << " (" << trace.scheme.two_phase_limit() << ")";
    }
  }
  out << "; " << precision << "\n";
  out << "tokens    T = " << trace.tokens << "\n\n";

  TextTable norms({"sublayer", "kind", "input RMS", "output RMS"});
  for (int s = 0; s < trace.sublayers; ++s) {
    norms.add_row({std::to_string(s + 1), s % 2 == 0 ? "attn" : "mlp",
                   format_fixed(trace.sublayer_input_rms[static_cast<std::size_t>(s)], 4),
                   format_fixed(trace.sublayer_output_rms[static_cast<std::size_t>(s)], 4)});
  }
  norms.print(out);

  // The table of mean weights has a row per read and a column per source: (L+1)^2 cells for Full
  // AttnRes (64 million at 4,000 layers, hundreds of MB of text). Printed up to kMaxWeightRows
  // reads; past it a note (--trace FILE has every weight).
  constexpr std::size_t kMaxWeightRows = 257;
  if (trace.reads.size() > kMaxWeightRows) {
    out << "\nnote: the table of mean depth-attention weights is left out: " << trace.reads.size()
        << " reads are more than " << kMaxWeightRows << " (--trace FILE writes every weight)\n";
  } else if (!trace.reads.empty()) {
    // Columns: every source label in order of first appearance (emb, b1.., partial / v1..).
    std::vector<std::string> labels;
    std::unordered_map<std::string, std::size_t> column_of;
    for (const auto& read : trace.reads) {
      for (const auto& source : read.sources) {
        if (column_of.emplace(source.label(), labels.size()).second)
          labels.push_back(source.label());
      }
    }
    std::stable_partition(labels.begin(), labels.end(),
                          [](const std::string& l) { return l != "partial" && l != "zero"; });
    for (std::size_t c = 0; c < labels.size(); ++c) column_of[labels[c]] = c;
    std::vector<std::string> header{"read (mean alpha over tokens)"};
    header.insert(header.end(), labels.begin(), labels.end());
    TextTable weights(header);
    for (const auto& read : trace.reads) {
      std::vector<std::string> row(header.size());
      row[0] = read.target;
      for (std::size_t j = 0; j < read.sources.size(); ++j) {
        row[column_of.at(read.sources[j].label()) + 1] =
            format_fixed(read.alpha_mean(static_cast<Eigen::Index>(j)), 3);
      }
      weights.add_row(std::move(row));
    }
    out << "\n";
    weights.print(out);
  }
  if (!trace.block_summary_rms.empty()) {
    out << "\nblock summary RMS  ";
    for (std::size_t n = 0; n < trace.block_summary_rms.size(); ++n) {
      out << (n == 0 ? "b0 " : "  b" + std::to_string(n) + " ")
          << format_fixed(trace.block_summary_rms[n], 4);
    }
    out << "\n";
  }
  if (!trace.semiseparable_rank.empty()) {
    out << "\nsemiseparable rank of mean M at cut k = 1.." << trace.semiseparable_rank.size()
        << " (SVD, tol " << trace.rank_tolerance << " x sigma_max):";
    for (int rank : trace.semiseparable_rank) out << " " << rank;
    out << "\n";
  }
  if (trace.mixing_mean.size() > 0) {  // the mixing analysis ran: say what its bounds left out
    if (const std::string note = mixing_analysis_note(trace); !note.empty())
      out << "note: " << note << "\n";
  }
  out << "\nfinal hidden RMS "
      << format_fixed(
             std::sqrt(result.hidden_final.template cast<double>().array().square().mean()), 4)
      << "; argmax logits per token:";
  for (Eigen::Index t = 0; t < result.logits.rows(); ++t) {
    Eigen::Index best = 0;
    result.logits.row(t).maxCoeff(&best);
    out << " " << best;
  }
  out << "\n";
}

// Where `forward --chart DIR` writes and how (docs/output-safety.md): an empty `target` is no
// chart.
struct ChartOutput {
  fs::path target;
  OutputDirectoryOptions options;
};

// The standard residual on the same weights, for the magnitude charts' reference curve.
template <typename Scalar>
ForwardTrace standard_trace(const ModelWeights<double>& model, const std::vector<int>& tokens,
                            ForwardOptions options, const EngineOptions& engine) {
  options.mode.reset();
  options.block_size.reset();
  options.zero_placeholder = false;
  options.record_mixing = false;
  const ModelWeights<Scalar> weights = convert_scheme(model, AttnResConfig{}).cast<Scalar>();
  ForwardEngine<Scalar> prepared(weights, engine);
  return prepared.forward(tokens, options).trace;
}

// The GUI's Depth attention, Magnitudes and Duality figures of this forward pass (the core's
// builders, core/model_charts.hpp), as PNG + SVG with their data as CSV, into chart.target.
void write_forward_charts(const ForwardTrace& trace, const ForwardTrace* reference,
                          ChartOutput& chart, ProgressBar& progress, std::ostream& out) {
  const std::string scheme = trace.scheme.describe();
  std::vector<MagnitudeCurve> curves{{scheme, &trace, false}};
  if (reference != nullptr)
    curves.push_back({reference->scheme.describe() + " (reference)", reference, true});
  const auto [inputs, outputs] = magnitude_charts(curves, "");
  const std::vector<HeatmapSpec> maps{alpha_heatmap(trace, alpha_title(scheme, trace, -1, -1)),
                                      mixing_heatmap(trace, scheme)};
  const std::vector<ChartSpec> figures{inputs, outputs, depth_rank_chart({&trace})};
  chart.options.progress = [&progress](std::size_t done, std::size_t total) {
    return progress.update(done, total);
  };
  std::vector<std::string> stems;
  const OutputDirectoryResult written =
      write_output_directory(chart.target, chart.options, [&](const fs::path& dir) {
        for (const auto& map : maps) {
          charts::render_heatmap_files(map, dir / (map.id + ".png"), dir / (map.id + ".svg"));
          write_file_atomically(dir / (map.id + ".csv"), heatmap_csv(map));
          stems.push_back(map.id);
        }
        for (const auto& spec : figures) {
          charts::render_chart_files(spec, dir / (spec.id + ".png"), dir / (spec.id + ".svg"));
          write_file_atomically(dir / (spec.id + ".csv"), chart_csv(spec));
          stems.push_back(spec.id);
        }
      });
  out << "wrote " << printable_text(chart.target.string()) << ": ";
  for (std::size_t i = 0; i < stems.size(); ++i) out << (i == 0 ? "" : ", ") << stems[i];
  out << " (.png, .svg, .csv each)\n";
  for (const auto& note : output_directory_notes(written))
    out << "note: " << printable_text(note) << "\n";
}

// The memory pre-check of a pass's trace. Full AttnRes keeps the weights of every read, T x (r+1)
// numbers at read r: T (L+1)(L+2)/2 in all, O(L^2), and the mixing analysis an (L+1)^2 mean
// matrix (its per-token matrices are bounded, mixing_analysis.hpp). A pass that would need more
// than the memory available is refused before any work, as load_model refuses weights.
void refuse_trace_beyond_memory(const ModelConfig& config, ResidualMode mode, std::size_t tokens,
                                bool record_mixing) {
  if (mode != ResidualMode::full) return;  // the other layouts' traces are O(L) or O(L N)
  const double L = config.sublayers();
  const double W = config.attn_res.window;
  double sources = 0;  // sum over reads r = 0 .. L of the sources they weigh
  for (std::int64_t r = 0; r <= config.sublayers(); ++r)
    sources += 1.0 + (W > 0 ? std::min<double>(static_cast<double>(r), W) : static_cast<double>(r));
  const double heads = config.attn_res.heads > 1 ? 1.0 + config.attn_res.heads : 1.0;
  // Per (read, source) pair: the weight of each token (and head), the source's description, and
  // its per-token and mean weights again in the mixing analysis.
  double bytes = sources * (static_cast<double>(tokens) * heads * sizeof(double) +
                            sizeof(DepthSource) + 2 * sizeof(double));
  if (record_mixing) bytes += (L + 1) * (L + 1) * sizeof(double) * 2;  // the mean, one token's M
  const auto available = static_cast<double>(available_memory_bytes());
  if (bytes > available) {
    throw Error("Full AttnRes at L = " + std::to_string(config.sublayers()) +
                " sublayers and T = " + std::to_string(tokens) +
                " tokens keeps the weights of every read in the pass's trace (T (L+1)(L+2)/2 "
                "numbers, growing as L^2): " +
                std::to_string(static_cast<std::uint64_t>(bytes / 1e6)) + " MB, but only " +
                std::to_string(static_cast<std::uint64_t>(available / 1e6)) +
                " MB of memory is available; refusing before the pass (give fewer tokens)");
  }
}

// The pass on `weights`; `model` (the float64 weights) only where charts need the standard
// residual on the same weights (null otherwise: a float model loaded without a float64 copy).
template <typename Scalar>
void run_prepared(const ModelWeights<Scalar>& weights, const ModelWeights<double>* model,
                  const std::vector<int>& tokens, ForwardOptions options,
                  const EngineOptions& engine, const std::string& model_dir,
                  const std::string& precision, const std::string& dump_path,
                  const std::string& trace_path, bool with_gradients, ChartOutput& chart,
                  std::ostream& out) {
  ForwardResult<Scalar> result;
  {
    ProgressBar progress("forward");
    options.progress = progress.callback();
    ForwardEngine<Scalar> prepared(weights, engine);
    result = prepared.forward(tokens, options);
  }
  throw_if_interrupted("forward pass");
  print_summary(out, model_dir, weights.config, result, precision);
  std::vector<TensorToWrite> dump = forward_dump_tensors(result);
  if (with_gradients) {
    // Loss and gradients of this one sequence (docs/training.md), on the same engine.
    Gradients<Scalar> gradients;
    {
      ProgressBar progress("gradients");
      ForwardOptions gradient_options = options;
      gradient_options.progress = progress.callback();
      GradientEngine<Scalar>(weights.config, engine)
          .compute(weights, {tokens}, gradient_options, gradients);
    }
    throw_if_interrupted("backward pass");
    out << "\nloss " << format_fixed(gradients.loss, 6) << " nats/token over "
        << gradients.predicted << " predicted positions; gradient norm "
        << format_fixed(gradient_norm(gradients.grad), 6) << "\n"
        << "output-gradient RMS by sublayer (Fig. 5c):";
    for (double rms : gradients.sublayer_output_grad_rms) out << " " << format_number(rms);
    out << "\n";
    for (auto& tensor : gradient_dump_tensors(gradients)) dump.push_back(std::move(tensor));
  }
  if (!dump_path.empty()) {
    write_safetensors(dump_path, dump,
                      {{"producer", "attnres forward"},
                       {"mode", to_string(result.trace.mode)},
                       {"precision", precision},
                       {"engine", to_string(engine.engine)}});
    out << "wrote " << printable_text(dump_path) << "\n";
  }
  if (!trace_path.empty()) {
    write_file_atomically(trace_path, trace_to_json(result).dump(1) + "\n");
    out << "wrote " << printable_text(trace_path) << "\n";
  }
  if (!chart.target.empty()) {
    ProgressBar progress("charts");
    std::optional<ForwardTrace> reference;
    if (result.trace.mode != ResidualMode::standard) {
      ATTNRES_ASSERT(model != nullptr, "charts come with the float64 weights");
      ForwardOptions reference_options = options;
      reference_options.progress = progress.callback();
      reference = standard_trace<Scalar>(*model, tokens, reference_options, engine);
    }
    write_forward_charts(result.trace, reference ? &*reference : nullptr, chart, progress, out);
  }
}

template <typename Scalar>
void run_forward(const ModelWeights<double>& model, const std::vector<int>& tokens,
                 ForwardOptions options, const EngineOptions& engine, const std::string& model_dir,
                 const std::string& precision, const std::string& dump_path,
                 const std::string& trace_path, bool with_gradients, ChartOutput& chart,
                 std::ostream& out) {
  run_prepared<Scalar>(model.cast<Scalar>(), &model, tokens, std::move(options), engine, model_dir,
                       precision, dump_path, trace_path, with_gradients, chart, out);
}

}  // namespace

int forward_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  std::string model_dir, tokens_text, mode_text, two_phase_text, precision_text, dump_path,
      trace_path;
  std::string engine_text, device_text, chart_dir;
  int threads = 0;
  int block_size = 0;
  int schedule_block = 0;
  po::options_description options = command_options("forward");
  options.add_options()("model", po::value(&model_dir)->required(),
                        "model directory (config.json + model.safetensors)")(
      "tokens", po::value(&tokens_text)->required(),
      "token ids, separated by spaces or commas, e.g. \"1 2 3\" or 1,2,3")(
      "mode", po::value(&mode_text),
      "override the residual mode: standard | full | block | denseformer | "
      "rescaled | mhc (a mode with other tensors, or any scheme flag, converts the model: "
      "docs/schemes.md)")("block-size", po::value(&block_size),
                          "override the block size S (sublayers, 1..L)")(
      "two-phase", po::value(&two_phase_text)->default_value("on"),
      "on: two-phase (o, m, l) schedule; off: one-shot reads")(
      "schedule-block", po::value(&schedule_block)->default_value(0),
      "Full AttnRes two-phase schedule block in sublayers (0: round(sqrt(L)))")(
      "zero-placeholder",
      "Block: add a zero source at each block's first sublayer "
      "(as some public ports do; off by default)")(
      "precision", po::value(&precision_text)->default_value("f32"),
      "bf16 | f32 | f64 (bf16: f32 weights, bf16 matrix products with f32 accumulation; "
      "docs/engines.md)")("engine", po::value(&engine_text)->default_value("fast"),
                          "fast (fused, threaded; the default) | reference (the readable oracle)")(
      "threads", po::value(&threads)->default_value(0),
      threads_help("CPU threads of the fast engine").c_str())(
      "device", po::value(&device_text)->default_value("cpu"),
      "cpu | cuda (the fast engine on a GPU, f32)")(
      "dump", po::value(&dump_path),
      "write logits, hidden_final, alpha.<r>, RMS to this "
      ".safetensors file (F32 at f32, F64 at f64)")(
      "trace", po::value(&trace_path), "write the trace (with source labels) to this JSON file")(
      "chart", po::value(&chart_dir),
      "write the GUI's Depth attention, Magnitudes and Duality figures of this "
      "pass into this directory: PNG + SVG, their data as CSV (new, empty, or written by attnres; "
      "see --force)")("force",
                      "with --chart: replace the contents of a directory that holds other files")(
      "grad",
      "also compute the loss (mean next-token cross-entropy) and the gradient of every "
      "parameter; --dump then adds loss, grad.<tensor name> and sublayer_output_grad_rms "
      "(docs/training.md)");
  ModelSchemeFlags scheme_flags;
  add_scheme_options(options, scheme_flags);
  po::variables_map values;
  if (parse_or_help(
          args, options, values, out,
          "usage: attnres forward --model DIR --tokens \"IDS\" [--mode M] [--block-size S] [scheme "
          "flags] "
          "[--two-phase on|off] [--schedule-block K] [--zero-placeholder] [--precision "
          "bf16|f32|f64] "
          "[--engine fast|reference] [--threads N] [--device cpu|cuda] [--dump F.safetensors] "
          "[--trace F.json] [--chart DIR [--force]] [--grad]")) {
    return kExitOk;
  }

  ForwardOptions forward_options;
  forward_options.mode = parse_mode_flag(values, mode_text);
  forward_options.two_phase = on_off("--two-phase", two_phase_text);
  forward_options.zero_placeholder = values.count("zero-placeholder") > 0;
  if (schedule_block < 0) {
    throw UsageError("--schedule-block must be >= 0, got " + std::to_string(schedule_block));
  }
  forward_options.full_schedule_block = schedule_block;
  const Precision precision_value = parse_precision_flag(precision_text);
  const std::string precision = to_string(precision_value);
  const std::vector<int> tokens =
      parse_flag_value([&] { return parse_token_ids(tokens_text, "--tokens"); });
  const EngineOptions engine = parse_engine_flags(engine_text, device_text, threads,
                                                  precision_value, given(values, "threads"));
  const bool with_gradients = values.count("grad") > 0;
  if (with_gradients && engine.device != Device::cpu) {
    throw UsageError(
        "--grad runs on the CPU only (the CUDA engine is forward-only); drop --device cuda");
  }
  if (with_gradients && tokens.size() < 2) {
    throw UsageError(
        "--grad needs at least 2 tokens in --tokens (position p predicts token p + 1)");
  }
  if (!dump_path.empty()) require_parent_directory(dump_path, "--dump");
  if (!trace_path.empty()) require_parent_directory(trace_path, "--trace");

  if (!dump_path.empty() && dump_path == trace_path) {
    throw UsageError("--dump and --trace name the same file '" + dump_path + "'");
  }
  for (const auto& [path, flag] :
       {std::pair{dump_path, "--dump"}, std::pair{trace_path, "--trace"}}) {
    if (path.empty()) continue;
    try {
      refuse_overwriting_inputs(path, {fs::path(model_dir)}, flag);
    } catch (const Error& error) {
      throw UsageError(error.what());
    }
    check_output_file(path, flag);  // refuse before the work, not after
  }

  ChartOutput chart;
  if (values.count("force") && !values.count("chart"))
    throw UsageError("--force applies to --chart DIR; give --chart");
  if (values.count("chart")) {
    chart.target = parse_flag_value([&] { return clean_output_path(chart_dir, "--chart"); });
    chart.options.owner = "forward-chart";
    chart.options.flag = "--chart";
    chart.options.force = values.count("force") > 0;
    chart.options.inputs = {fs::path(model_dir)};
    check_output_directory(chart.target, chart.options);  // refuse before the work, not after
    charts::ensure_application();                         // before any staging folder exists
  }

  // A float pass of the model's own scheme without charts reads the weights straight to float32
  // (docs/interop.md: no float64 copy of a large checkpoint); everything else reads float64.
  const bool float_only = !computes_in_f64(precision_value) && !scheme_flags_given(values) &&
                          !values.count("mode") && !values.count("block-size") &&
                          chart.target.empty();
  std::optional<ModelWeights<float>> model32;
  ModelWeights<double> model;
  if (float_only) {
    model32 = load_model_as<float>(model_dir);
    model.config = model32->config;  // the shape and scheme only, for the checks below
  } else {
    model = load_model(model_dir);
  }
  const int L = model.config.sublayers();
  const auto [mode, mode_source] =
      apply_block_size_flag(values, mode_text, block_size, model.config, forward_options);
  if (scheme_flags_given(values) || !same_tensors(mode, model.config.attn_res.mode)) {
    // Read the same weights with another scheme: convert (docs/schemes.md "Comparing schemes").
    AttnResConfig target =
        mode == model.config.attn_res.mode ? model.config.attn_res : AttnResConfig{};
    target.mode = mode;
    target.key_norm_eps = model.config.attn_res.key_norm_eps;
    target.block_size = mode == ResidualMode::block
                            ? forward_options.block_size.value_or(model.config.attn_res.block_size)
                            : 0;
    apply_scheme_flags(values, scheme_flags, target);
    validate_scheme(model.config, target);
    ATTNRES_ASSERT(!float_only, "a scheme conversion reads float64 weights");
    model = convert_scheme(model, target);
    forward_options.mode.reset();
    forward_options.block_size.reset();
  }
  if (forward_options.zero_placeholder && mode != ResidualMode::block) {
    throw UsageError("--zero-placeholder applies to Block AttnRes, but " + mode_source +
                     " is not block");
  }
  if (given(values, "two-phase"))
    refuse_two_phase_without_effect(model.config, forward_options, mode_source);
  if (given(values, "schedule-block")) {
    if (mode != ResidualMode::full || !forward_options.two_phase) {
      throw UsageError("--schedule-block applies to Full AttnRes with --two-phase on, but " +
                       (mode != ResidualMode::full ? mode_source + " is not full"
                                                   : std::string("--two-phase is off")));
    }
    AttnResConfig scheme = model.config.attn_res;  // the model's (converted) scheme, read as full
    scheme.mode = mode;
    if (const std::string limit = scheme.two_phase_limit(); !limit.empty()) {
      throw UsageError("--schedule-block sets the two-phase schedule, but " + limit +
                       ": every read is one-shot and it would change nothing; leave it out");
    }
    if (schedule_block > L) {
      throw UsageError("--schedule-block " + std::to_string(schedule_block) +
                       " is larger than L = " + std::to_string(L) + " sublayers");
    }
  }
  refuse_trace_beyond_memory(model.config, mode, tokens.size(), forward_options.record_mixing);
  if (model32) {
    run_prepared<float>(*model32, nullptr, tokens, forward_options, engine, model_dir, precision,
                        dump_path, trace_path, with_gradients, chart, out);
  } else if (computes_in_f64(precision_value)) {
    run_forward<double>(model, tokens, forward_options, engine, model_dir, precision, dump_path,
                        trace_path, with_gradients, chart, out);
  } else {
    run_forward<float>(model, tokens, forward_options, engine, model_dir, precision, dump_path,
                       trace_path, with_gradients, chart, out);
  }
  return kExitOk;
}

}  // namespace attnres::cli

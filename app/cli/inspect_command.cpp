// attnres inspect: what a model's depth reads learnt (docs/interop.md "attnres inspect"). Static:
// the architecture, the checkpoint (layout, files, dtypes), the AttnRes layout (blocks in decoder
// layers and in sublayers, sources per read), each read's pseudo-query norm and the cosine
// similarity between reads. With a text (--text FILE, --tokens IDS): routing statistics of every
// read (routing_stats.hpp) as a table, JSON or CSV, and with --out DIR the heatmaps and charts.
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>

#include "attnres/atomic_file.hpp"
#include "attnres/depth_layout.hpp"
#include "attnres/engine.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/forward_steps.hpp"
#include "attnres/model.hpp"
#include "attnres/model_charts.hpp"
#include "attnres/output_dir.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/routing_stats.hpp"
#include "attnres/token_ids.hpp"
#include "chart_render.hpp"
#include "cli.hpp"
#include "heatmap_render.hpp"
#include "options.hpp"
#include "progress.hpp"
#include "text_table.hpp"

namespace attnres::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

ordered_json number_or_null(double value) {
  return std::isfinite(value) ? ordered_json(value) : ordered_json(nullptr);
}

std::string fixed_or_dash(double value, int decimals) {
  return std::isfinite(value) ? format_fixed(value, decimals) : std::string("-");
}

// What inspect found, before it is printed in one of the formats.
struct Inspection {
  std::string model_dir;
  ModelConfig config;
  CheckpointReport checkpoint;
  std::int64_t parameters = 0;
  std::vector<int> sources_per_read;  // by read 0 .. L
  int blocks = 0;                     // N (Block), 0 otherwise
  Eigen::VectorXd query_norm, effective_norm;
  Eigen::MatrixXd cosines;
  bool has_routing = false;
  int tokens = 0;
  std::string text_source;  // "--text FILE" or "--tokens"
  std::string precision;
  std::vector<ReadRouting> routing;
  ForwardTrace trace;
};

std::string architecture_line(const Inspection& in) {
  const ModelConfig& c = in.config;
  std::string line = c.qk_norm ? "Qwen3 (q/k norms)" : "Llama";
  line += ", d = " + std::to_string(c.hidden_size) + ", " + std::to_string(c.num_hidden_layers) +
          " decoder layers = " + std::to_string(c.sublayers()) + " sublayers, " +
          std::to_string(c.num_attention_heads) + " heads (" +
          std::to_string(c.num_key_value_heads) + " kv), head_dim " + std::to_string(c.head_dim()) +
          ", ffn " + std::to_string(c.intermediate_size) + ", vocab " +
          std::to_string(c.vocab_size);
  if (c.tie_word_embeddings) line += ", tied embeddings";
  return line + "; " + std::to_string(in.parameters) + " parameters";
}

std::string attn_res_line(const Inspection& in) {
  const AttnResConfig& a = in.config.attn_res;
  std::string line = a.describe();
  if (a.mode == ResidualMode::block) {
    line += ": " + std::to_string(a.block_size) + " sublayers per block";
    if (a.block_size % 2 == 0) line += " = " + std::to_string(a.block_size / 2) + " decoder layers";
    line += ", N = " + std::to_string(in.blocks) + " blocks";
  }
  return line;
}

ordered_json inspection_json(const Inspection& in) {
  const ModelConfig& c = in.config;
  ordered_json dtypes = ordered_json::array();
  for (const auto& [dtype, count] : in.checkpoint.dtypes)
    dtypes.push_back({{"dtype", dtype}, {"tensors", count}});
  ordered_json checkpoint = {{"layout", to_string(in.checkpoint.layout)},
                             {"sharded", in.checkpoint.sharded},
                             {"files", in.checkpoint.files},
                             {"dtypes", dtypes},
                             {"tensor_bytes", in.checkpoint.tensor_bytes}};
  ordered_json attn = {
      {"scheme", c.attn_res.describe()},
      {"mode", to_string(c.attn_res.mode)},
      {"block_size_sublayers", c.attn_res.mode == ResidualMode::block
                                   ? ordered_json(c.attn_res.block_size)
                                   : ordered_json(nullptr)},
      {"block_size_layers", c.attn_res.mode == ResidualMode::block && c.attn_res.block_size % 2 == 0
                                ? ordered_json(c.attn_res.block_size / 2)
                                : ordered_json(nullptr)},
      {"blocks", in.blocks},
      {"sources_per_read", in.sources_per_read}};
  ordered_json queries = ordered_json::array();
  ordered_json cosines = ordered_json::array();
  const int L = c.sublayers();
  for (Eigen::Index r = 0; r < in.query_norm.size(); ++r) {
    queries.push_back({{"read", r},
                       {"target", read_target_name(static_cast<int>(r), L)},
                       {"query_norm", in.query_norm(r)},
                       {"effective_query_norm", in.effective_norm(r)},
                       {"cosine_previous",
                        r > 0 ? number_or_null(in.cosines(r, r - 1)) : ordered_json(nullptr)}});
    ordered_json row = ordered_json::array();
    for (Eigen::Index s = 0; s < in.cosines.cols(); ++s)
      row.push_back(number_or_null(in.cosines(r, s)));
    cosines.push_back(row);
  }
  ordered_json routing = nullptr;
  if (in.has_routing) {
    ordered_json reads = ordered_json::array();
    for (std::size_t i = 0; i < in.routing.size(); ++i) {
      const ReadRouting& r = in.routing[i];
      ordered_json mean = ordered_json::array();
      const Eigen::VectorXd& alpha = in.trace.reads[i].alpha_mean;
      for (Eigen::Index k = 0; k < alpha.size(); ++k) mean.push_back(alpha(k));
      reads.push_back({{"read", r.read},
                       {"target", r.target},
                       {"sources", r.sources},
                       {"normalised_entropy", number_or_null(r.normalised_entropy)},
                       {"effective_sources", r.effective_sources},
                       {"top1_mass", r.top1_mass},
                       {"embedding_weight", number_or_null(r.embedding_weight)},
                       {"recent_weight", r.recent_weight},
                       {"mean_weights", mean}});
    }
    routing = {{"tokens", in.tokens},
               {"input", in.text_source},
               {"precision", in.precision},
               {"reads", reads}};
  }
  return {{"schema", schema_tag("inspect")},
          {"model", in.model_dir},
          {"architecture",
           {{"model_type", c.qk_norm ? "qwen3" : "llama"},
            {"hidden_size", c.hidden_size},
            {"num_hidden_layers", c.num_hidden_layers},
            {"sublayers", L},
            {"num_attention_heads", c.num_attention_heads},
            {"num_key_value_heads", c.num_key_value_heads},
            {"head_dim", c.head_dim()},
            {"intermediate_size", c.intermediate_size},
            {"vocab_size", c.vocab_size},
            {"qk_norm", c.qk_norm},
            {"tie_word_embeddings", c.tie_word_embeddings},
            {"parameters", in.parameters}}},
          {"checkpoint", checkpoint},
          {"attn_res", attn},
          {"notes", in.checkpoint.notes},
          {"queries", queries},
          {"query_cosines", cosines},
          {"routing", routing}};
}

// One row per read: its query, and its routing when a text was given.
std::string inspection_csv(const Inspection& in) {
  std::string out =
      "read,target,sources,query_norm,effective_query_norm,cosine_previous,normalised_entropy,"
      "effective_sources,top1_mass,embedding_weight,recent_weight\n";
  auto cell = [](double v) { return std::isfinite(v) ? format_number(v) : std::string(); };
  const int L = in.config.sublayers();
  for (int r = 0; r < in.query_norm.size(); ++r) {
    out += std::to_string(r) + ",\"" + read_target_name(r, L) + "\"," +
           std::to_string(in.sources_per_read[static_cast<std::size_t>(r)]) + "," +
           cell(in.query_norm(r)) + "," + cell(in.effective_norm(r)) + "," +
           (r > 0 ? cell(in.cosines(r, r - 1)) : std::string());
    if (in.has_routing) {
      const ReadRouting& x = in.routing[static_cast<std::size_t>(r)];
      out += "," + cell(x.normalised_entropy) + "," + cell(x.effective_sources) + "," +
             cell(x.top1_mass) + "," + cell(x.embedding_weight) + "," + cell(x.recent_weight);
    } else {
      out += ",,,,,";
    }
    out += "\n";
  }
  return out;
}

void print_inspection(std::ostream& out, const Inspection& in) {
  out << "model " << printable_text(in.model_dir) << ": " << architecture_line(in) << "\n"
      << "checkpoint: " << checkpoint_summary(in.checkpoint) << "\n"
      << "AttnRes: " << attn_res_line(in) << "\n";
  for (const auto& note : in.checkpoint.notes) out << "note: " << printable_text(note) << "\n";
  if (in.config.attn_res.mode == ResidualMode::standard) {
    out << "The standard residual has no depth reads: nothing to inspect beyond the shape.\n";
    return;
  }
  const int L = in.config.sublayers();
  out << "\nDepth reads (query: the pseudo-query w; scoring: w ⊙ g, the vector that scores the "
         "RMS-normalised sources; cos: with the read before)";
  if (in.has_routing) {
    out << ", routing over " << in.tokens << " tokens of " << in.text_source << " (" << in.precision
        << ")";
  }
  out << ":\n";
  std::vector<std::string> header = {"read", "target", "sources", "|w|", "|w ⊙ g|", "cos"};
  if (in.has_routing) {
    for (const char* h : {"norm. entropy", "eff. sources", "top-1", "on emb", "on recent"})
      header.push_back(h);
  }
  TextTable table(header);
  for (int r = 0; r <= L; ++r) {
    std::vector<std::string> row = {
        std::to_string(r),
        read_target_name(r, L),
        std::to_string(in.sources_per_read[static_cast<std::size_t>(r)]),
        format_fixed(in.query_norm(r), 4),
        format_fixed(in.effective_norm(r), 4),
        r > 0 ? fixed_or_dash(in.cosines(r, r - 1), 3) : "-"};
    if (in.has_routing) {
      const ReadRouting& x = in.routing[static_cast<std::size_t>(r)];
      row.push_back(fixed_or_dash(x.normalised_entropy, 3));
      row.push_back(format_fixed(x.effective_sources, 2));
      row.push_back(format_fixed(x.top1_mass, 3));
      row.push_back(fixed_or_dash(x.embedding_weight, 3));
      row.push_back(format_fixed(x.recent_weight, 3));
    }
    table.add_row(row);
  }
  table.print(out);
  if (!in.has_routing) {
    out << "Give --text FILE (its bytes as token ids) or --tokens IDS for routing statistics "
           "(docs/interop.md).\n";
  }
}

template <typename Scalar>
void fill_inspection(Inspection& in, const ModelWeights<Scalar>& model,
                     const std::vector<int>& tokens, const EngineOptions& engine,
                     ProgressBar& progress) {
  in.config = model.config;
  const int L = model.config.sublayers();
  const DepthLayout layout = make_depth_layout(model.config.attn_res, L);
  in.sources_per_read.assign(static_cast<std::size_t>(L + 1), 0);
  for (std::size_t r = 0; r < layout.reads.size(); ++r)
    in.sources_per_read[r] = static_cast<int>(layout.reads[r].size());
  in.blocks = model.config.attn_res.mode == ResidualMode::block ? layout.blocks : 0;
  in.query_norm.resize(L + 1);
  for (int r = 0; r <= L; ++r)
    in.query_norm(r) = model.depth_read(r).query.template cast<double>().norm();
  const Eigen::MatrixXd scoring = effective_queries(model);
  in.effective_norm = scoring.rowwise().norm();
  in.cosines = row_cosines(scoring);
  in.parameters = parameter_count(model);
  if (tokens.empty() || model.config.attn_res.mode == ResidualMode::standard) return;
  ForwardOptions options;
  options.progress = progress.callback();
  progress.set_label("forward");
  in.trace = engine_forward(model, tokens, options, engine).trace;
  in.routing = routing_statistics(in.trace);
  in.has_routing = true;
}

void write_inspection_files(const Inspection& in, const fs::path& dir) {
  write_file_atomically(dir / "inspect.json", inspection_json(in).dump(2) + "\n");
  write_file_atomically(dir / "inspect.csv", inspection_csv(in));
  if (in.config.attn_res.mode == ResidualMode::standard) return;
  std::vector<HeatmapSpec> maps{query_cosine_heatmap(in.cosines)};
  std::vector<ChartSpec> figures;
  if (in.has_routing) {
    const std::string scheme = in.config.attn_res.describe();
    maps.push_back(alpha_heatmap(in.trace, alpha_title(scheme, in.trace, -1, -1)));
    maps.push_back(mixing_heatmap(in.trace, scheme));
    figures.push_back(routing_chart(in.routing, in.config.sublayers()));
  }
  for (const auto& map : maps) {
    charts::render_heatmap_files(map, dir / (map.id + ".png"), dir / (map.id + ".svg"));
    write_file_atomically(dir / (map.id + ".csv"), heatmap_csv(map));
  }
  for (const auto& spec : figures) {
    charts::render_chart_files(spec, dir / (spec.id + ".png"), dir / (spec.id + ".svg"));
    write_file_atomically(dir / (spec.id + ".csv"), chart_csv(spec));
  }
}

}  // namespace

int inspect_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string model_dir, text_path, tokens_text, format, out_dir, precision_text;
  int max_tokens = 512, threads = 0;
  po::options_description options = command_options("inspect");
  options.add_options()("model", po::value(&model_dir)->required(),
                        "model directory in any layout of docs/interop.md (also the first "
                        "argument)")(
      "text", po::value(&text_path),
      "routing statistics over this file: its bytes are the token ids (the lab has no "
      "tokenizer; the model's vocabulary must hold 256)")(
      "tokens", po::value(&tokens_text),
      "or: token ids, e.g. \"1 2 3\" (from the model's tokenizer)")(
      "max-tokens", po::value(&max_tokens)->default_value(512),
      "read at most this many tokens of --text")(
      "precision", po::value(&precision_text)->default_value("f32"),
      "f32 | bf16 (the fast engine, float weights) | f64 (the reference engine)")(
      "threads", po::value(&threads)->default_value(0),
      threads_help("CPU threads of the fast engine").c_str())(
      "format", po::value(&format)->default_value("table"), "table | json | csv")(
      "out", po::value(&out_dir),
      "also write inspect.json, inspect.csv and the heatmaps and charts (PNG + SVG + CSV) into "
      "this directory (new, empty, or written by attnres; see --force)")(
      "force", "with --out: replace the contents of a directory that holds other files");
  po::positional_options_description positional;
  positional.add("model", 1);
  po::variables_map values;
  if (parse_or_help(
          args, options, values, out,
          "usage: attnres inspect (MODEL | --model DIR) [--text FILE [--max-tokens N] | --tokens "
          "IDS] "
          "[--precision f32|bf16|f64] [--threads N] [--format table|json|csv] [--out DIR "
          "[--force]]\n"
          "The AttnRes layout of a model in any layout (docs/interop.md), its pseudo-query "
          "norms and their cosine similarity by read; with a text, per read the normalised "
          "entropy, effective number of sources, top-1 mass and the weight on the embedding and "
          "on the most recent source.",
          &positional)) {
    return kExitOk;
  }
  require_format(format, {"table", "json", "csv"});
  if (values.count("text") && values.count("tokens"))
    throw UsageError("give --text FILE or --tokens IDS, not both");
  if (given(values, "max-tokens") && !values.count("text"))
    throw UsageError("--max-tokens applies to --text FILE; give --text or leave it out");
  if (max_tokens < 1)
    throw UsageError("--max-tokens must be at least 1, got " + std::to_string(max_tokens));
  if (values.count("force") && !values.count("out"))
    throw UsageError("--force applies to --out DIR; give --out");
  const Precision precision = parse_precision_flag(precision_text);
  const EngineOptions engine =
      parse_engine_flags(precision == Precision::f64 ? "reference" : "fast", "cpu", threads,
                         precision, given(values, "threads"));
  const bool routing_asked = values.count("text") || values.count("tokens");
  if (!routing_asked) {
    for (const char* flag : {"precision", "threads"}) {
      if (given(values, flag)) {
        throw UsageError(std::string("--") + flag +
                         " sets the forward pass of the routing statistics; give --text or "
                         "--tokens");
      }
    }
  }
  std::vector<int> tokens;
  std::string text_source;
  if (values.count("tokens")) {
    tokens = parse_flag_value([&] { return parse_token_ids(tokens_text, "--tokens"); });
    text_source = "--tokens";
  } else if (values.count("text")) {
    const std::string bytes = parse_flag_value([&] { return read_file(text_path, "a text file"); });
    if (bytes.empty()) throw UsageError("--text " + text_path + " is empty");
    for (std::size_t i = 0; i < bytes.size() && tokens.size() < std::size_t(max_tokens); ++i)
      tokens.push_back(static_cast<unsigned char>(bytes[i]));
    text_source = text_path;
  }
  OutputDirectoryOptions output;
  fs::path target;
  std::vector<std::string> notes;
  if (values.count("out")) {
    output.owner = "inspect";
    output.force = values.count("force") > 0;
    output.inputs = {fs::path(model_dir)};
    if (!text_path.empty()) output.inputs.push_back(fs::path(text_path));
    target = parse_flag_value([&] { return clean_output_path(out_dir, "--out"); });
    notes = check_output_directory(target, output);
    charts::ensure_application();
  }

  ProgressBar progress("loading");
  Inspection in;
  in.model_dir = model_dir;
  in.text_source = text_source;
  in.tokens = static_cast<int>(tokens.size());
  in.precision = to_string(precision);
  if (precision == Precision::f64) {
    const auto model = load_model_as<double>(model_dir, progress.callback(), &in.checkpoint);
    if (!tokens.empty()) check_tokens(model.config, tokens);
    fill_inspection(in, model, tokens, engine, progress);
  } else {
    const auto model = load_model_as<float>(model_dir, progress.callback(), &in.checkpoint);
    if (!tokens.empty()) {
      try {
        check_tokens(model.config, tokens);
      } catch (const Error& error) {
        throw UsageError(std::string(error.what()) +
                         (values.count("text") ? " (--text feeds bytes 0..255 as token ids)" : ""));
      }
    }
    fill_inspection(in, model, tokens, engine, progress);
  }
  if (values.count("text") && static_cast<int>(tokens.size()) == max_tokens)
    notes.push_back("read the first " + std::to_string(max_tokens) + " bytes of " + text_path +
                    " (--max-tokens)");
  if (routing_asked && in.config.attn_res.mode == ResidualMode::standard)
    notes.push_back("the standard residual has no depth reads: no routing statistics");

  if (format == "json") {
    out << inspection_json(in).dump(2) << "\n";
  } else if (format == "csv") {
    out << inspection_csv(in);
  } else {
    print_inspection(out, in);
  }
  if (!target.empty()) {
    output.progress = progress.callback();
    const OutputDirectoryResult written = write_output_directory(
        target, output, [&](const fs::path& dir) { write_inspection_files(in, dir); });
    for (const auto& note : output_directory_notes(written)) notes.push_back(note);
    if (format == "table") out << "wrote " << printable_text(target.string()) << "\n";
  }
  for (const auto& note : notes)
    (format == "table" ? out : err) << "note: " << printable_text(note) << "\n";
  return kExitOk;
}

}  // namespace attnres::cli

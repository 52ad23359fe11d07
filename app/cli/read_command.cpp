// attnres read: one depth read, step by step — the sources, keys, scores, softmax and weighted sum
// of read r at token t, and for a two-phase read its phases and merge (the core's
// read_walkthrough, core/model/include/attnres/read_walkthrough.hpp).
#include <cmath>
#include <nlohmann/json.hpp>
#include <ostream>

#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/read_walkthrough.hpp"
#include "attnres/token_ids.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "text_table.hpp"

namespace attnres::cli {

namespace {

constexpr int kDecimals = 6;

const char* kind_name(DepthSource::Kind kind) {
  switch (kind) {
    case DepthSource::Kind::embedding:
      return "embedding";
    case DepthSource::Kind::sublayer_output:
      return "sublayer_output";
    case DepthSource::Kind::block:
      return "block";
    case DepthSource::Kind::partial_block:
      return "partial_block";
    case DepthSource::Kind::zero_placeholder:
      return "zero_placeholder";
  }
  return "?";
}

// "[0.1234, -0.5678, ...]": the first `channels` entries of x.
std::string preview(const Eigen::VectorXd& x, int channels) {
  std::string text = "[";
  const auto shown = std::min<Eigen::Index>(channels, x.size());
  for (Eigen::Index j = 0; j < shown; ++j) {
    if (j > 0) text += ", ";
    text += format_fixed(x(j), kDecimals);
  }
  if (shown < x.size()) text += ", ...";
  text += "]";
  return text;
}

nlohmann::ordered_json vector_json(const Eigen::VectorXd& x) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    if (std::isfinite(x(i))) {
      out.push_back(x(i));
    } else {
      out.push_back(nullptr);  // the max of an empty phase 2 (-inf)
    }
  }
  return out;
}

nlohmann::ordered_json stats_json(const WalkthroughStats& stats) {
  return {{"sources", stats.sources},
          {"o", vector_json(stats.o)},
          {"m", vector_json(stats.m)},
          {"l", vector_json(stats.l)}};
}

nlohmann::ordered_json walkthrough_json(const ReadWalkthrough& w, const std::string& model_dir,
                                        const std::vector<int>& tokens) {
  nlohmann::ordered_json sources = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < w.sources.size(); ++i) {
    const WalkthroughSource& s = w.sources[i];
    sources.push_back({{"index", i},
                       {"label", s.label},
                       {"description", s.description},
                       {"kind", kind_name(s.source.kind)},
                       {"block", s.source.block},
                       {"members", {s.source.first_member, s.source.last_member}},
                       {"rms", s.rms},
                       {"value", vector_json(s.value)},
                       {"key_rms", vector_json(s.key_rms)},
                       {"key", vector_json(s.key)},
                       {"score", vector_json(s.score)},
                       {"shifted_exp", vector_json(s.shifted_exp)},
                       {"alpha", vector_json(s.weight)},
                       {"phase", s.phase}});
  }
  nlohmann::ordered_json json = {
      {"schema", schema_tag("read")},
      {"inputs",
       {{"model", model_dir},
        {"mode", to_string(w.scheme.mode)},
        {"block_size", w.scheme.mode == ResidualMode::block ? w.scheme.block_size : 0},
        {"tokens", tokens},
        {"token", w.token},
        {"read", w.read}}},
      {"scheme", w.scheme.describe()},
      {"sublayers", w.sublayers},
      {"read", w.read},
      {"target", w.target},
      {"token", w.token},
      {"token_id", w.token_id},
      {"heads", w.heads},
      {"key_norm_eps", w.key_norm_eps},
      {"query", vector_json(w.query)},
      {"key_norm_gain", vector_json(w.key_norm_gain)},
      {"sources", sources},
      {"softmax", nullptr},
      {"h", vector_json(w.h)},
      {"h_rms", w.h_rms},
      {"two_phase", nullptr},
      {"two_phase_note", w.two_phase_note}};
  if (w.softmax_max.size() > 0) {
    json["softmax"] = {{"max", vector_json(w.softmax_max)},
                       {"denominator", vector_json(w.softmax_denominator)}};
  }
  if (w.two_phase) {
    const WalkthroughTwoPhase& two = *w.two_phase;
    json["two_phase"] = {{"group_reads", {two.group_first_read, two.group_last_read}},
                         {"phase1", stats_json(two.phase1)},
                         {"phase2", stats_json(two.phase2)},
                         {"scale1", vector_json(two.scale1)},
                         {"scale2", vector_json(two.scale2)},
                         {"merged", stats_json(two.merged)},
                         {"h", vector_json(two.h)},
                         {"alpha", vector_json(two.weights)},
                         {"max_difference", two.max_difference}};
  }
  return json;
}

// A header per head ("s_i" with one head, "s_i head 0", "s_i head 1", ... with several).
void add_head_columns(std::vector<std::string>& header, const std::string& name, int heads) {
  for (int c = 0; c < heads; ++c) {
    std::string column = name;
    if (heads > 1) {
      column += " h";
      column += std::to_string(c);
    }
    header.push_back(std::move(column));
  }
}

void add_head_cells(std::vector<std::string>& row, const Eigen::VectorXd& x) {
  for (Eigen::Index c = 0; c < x.size(); ++c) row.push_back(format_fixed(x(c), kDecimals));
}

// "emb, b1": the labels of some of the read's sources.
std::string labels_of(const ReadWalkthrough& w, const std::vector<int>& indices) {
  if (indices.empty()) return "(none)";
  std::string text;
  for (std::size_t k = 0; k < indices.size(); ++k) {
    if (k > 0) text += ", ";
    text += w.sources[static_cast<std::size_t>(indices[k])].label;
  }
  return text;
}

// "1.234567" per head, joined by " | ", or "-inf" for the max of no source.
std::string per_head(const Eigen::VectorXd& x) {
  std::string text;
  for (Eigen::Index c = 0; c < x.size(); ++c) {
    if (c > 0) text += " | ";
    text += std::isfinite(x(c)) ? format_fixed(x(c), kDecimals) : std::string("-inf");
  }
  return text;
}

void print_walkthrough(std::ostream& out, const ReadWalkthrough& w, const std::string& model_dir,
                       const ModelConfig& config, int channels) {
  const std::string section = w.scheme.mode == ResidualMode::standard ? "§2.1"
                              : w.scheme.mode == ResidualMode::block  ? "§2.3"
                                                                      : "§2.2";
  const bool several = w.heads > 1;
  out << "read      " << w.read << " of 0 .. L = " << w.sublayers << ": the input of " << w.target
      << ", at token position " << w.token << " (id " << w.token_id << ") of T = " << w.tokens
      << "\n";
  out << "model     " << printable_text(model_dir) << ": d = " << config.hidden_size << ", "
      << config.num_hidden_layers << " layers = L " << config.sublayers() << " sublayers; "
      << w.scheme.describe();
  if (w.scheme.mode != ResidualMode::standard) {
    out << "; " << w.heads << " depth head" << (several ? "s" : "") << "; key norm "
        << (w.scheme.key_norm ? "on, eps " + format_number(w.key_norm_eps) : std::string("off"));
  }
  out << "\n";
  if (w.query.size() > 0) {
    out << "query     q "
        << (w.scheme.query_source == QuerySource::input ? "= w + W u / rms(u) at this token"
                                                        : "= w (the read's pseudo-query)")
        << ": " << preview(w.query, channels) << "\n";
  }
  if (w.key_norm_gain.size() > 0)
    out << "gain      g (key norm): " << preview(w.key_norm_gain, channels) << "\n";

  out << "\n1. Sources v_i of the read (docs/math.md " << section << ")\n";
  TextTable sources({"i", "source", "what", "RMS of v_i", "v_i (first channels)"});
  for (std::size_t i = 0; i < w.sources.size(); ++i) {
    const auto& s = w.sources[i];
    sources.add_row({std::to_string(i), s.label, s.description, format_fixed(s.rms, kDecimals),
                     preview(s.value, channels)});
  }
  sources.print(out);

  if (w.scheme.mode == ResidualMode::standard) {
    out << "\n2. The standard residual: every weight is 1, h = v_0 + ... + v_" << w.read
        << "\n   h (first channels) " << preview(w.h, channels) << ", RMS "
        << format_fixed(w.h_rms, kDecimals) << "\n";
    return;
  }

  out << "\n2. Keys and scores: "
      << (w.scheme.key_norm ? "k_i = g * v_i / rms_i, rms_i = sqrt(mean(v_i^2) + eps)"
                            : "k_i = v_i (key norm off)")
      << "; s_i = q . k_i" << (several ? " over head h's channels (rms_i too)" : "") << "\n";
  std::vector<std::string> score_header{"i", "source"};
  add_head_columns(score_header, "rms_i", w.heads);
  score_header.push_back("k_i (first channels)");
  add_head_columns(score_header, "s_i", w.heads);
  TextTable scores(score_header);
  for (std::size_t i = 0; i < w.sources.size(); ++i) {
    const auto& s = w.sources[i];
    std::vector<std::string> row{std::to_string(i), s.label};
    add_head_cells(row, s.key_rms);
    row.push_back(preview(s.key, channels));
    add_head_cells(row, s.score);
    scores.add_row(std::move(row));
  }
  scores.print(out);

  out << "\n3. Softmax over the " << w.sources.size()
      << " sources: m = max_i s_i = " << per_head(w.softmax_max)
      << ", l = sum_i exp(s_i - m) = " << per_head(w.softmax_denominator)
      << (several ? " (h0 | h1 | ...)" : "") << "; alpha_i = exp(s_i - m) / l\n";
  std::vector<std::string> softmax_header{"i", "source"};
  add_head_columns(softmax_header, "s_i - m", w.heads);
  add_head_columns(softmax_header, "exp(s_i - m)", w.heads);
  add_head_columns(softmax_header, "alpha_i", w.heads);
  TextTable softmax(softmax_header);
  for (std::size_t i = 0; i < w.sources.size(); ++i) {
    const auto& s = w.sources[i];
    std::vector<std::string> row{std::to_string(i), s.label};
    add_head_cells(row, s.score - w.softmax_max);
    add_head_cells(row, s.shifted_exp);
    add_head_cells(row, s.weight);
    softmax.add_row(std::move(row));
  }
  softmax.print(out);

  out << "\n4. The weighted sum h = sum_i alpha_i v_i: RMS " << format_fixed(w.h_rms, kDecimals)
      << " (first channels; the full vector in --format json)\n";
  std::vector<std::string> sum_header{"channel j"};
  for (const auto& s : w.sources) sum_header.push_back("alpha v_j (" + s.label + ")");
  sum_header.emplace_back("h_j");
  TextTable sum(sum_header);
  const Eigen::Index width = w.h.size() / w.heads;
  for (Eigen::Index j = 0; j < std::min<Eigen::Index>(channels, w.h.size()); ++j) {
    std::vector<std::string> row{std::to_string(j)};
    for (const auto& s : w.sources)
      row.push_back(format_fixed(s.weight(j / width) * s.value(j), kDecimals));
    row.push_back(format_fixed(w.h(j), kDecimals));
    sum.add_row(std::move(row));
  }
  sum.print(out);

  if (!w.two_phase) {
    out << "\n5. No two-phase form: " << w.two_phase_note << "\n";
    return;
  }
  const WalkthroughTwoPhase& two = *w.two_phase;
  out << "\n5. Two-phase (docs/math.md §2.4): schedule group reads " << two.group_first_read
      << " .. " << two.group_last_read
      << "; phase 1 reads the group's shared history, phase 2 the sources produced inside the "
         "group, then one merge\n";
  TextTable phases({"phase", "sources", "m", "l", "o (first channels)"});
  phases.add_row({"1", labels_of(w, two.phase1.sources), per_head(two.phase1.m),
                  per_head(two.phase1.l), preview(two.phase1.o, channels)});
  phases.add_row({"2", labels_of(w, two.phase2.sources), per_head(two.phase2.m),
                  per_head(two.phase2.l), preview(two.phase2.o, channels)});
  phases.add_row({"merged", labels_of(w, two.merged.sources), per_head(two.merged.m),
                  per_head(two.merged.l), preview(two.merged.o, channels)});
  phases.print(out);
  out << "   merge: m = max(m1, m2); exp(m1 - m) = " << per_head(two.scale1)
      << ", exp(m2 - m) = " << per_head(two.scale2) << "\n"
      << "          l = l1 exp(m1 - m) + l2 exp(m2 - m) = " << per_head(two.merged.l)
      << "; o = o1 exp(m1 - m) + o2 exp(m2 - m)\n"
      << "   h = o / l (first channels) " << preview(two.h, channels)
      << "; max |h - one-shot h| = " << format_number(two.max_difference) << "\n";
}

}  // namespace

int read_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  std::string model_dir, tokens_text, mode_text, format;
  int token = 0, read = 0, sublayer = 0, block_size = 0, schedule_block = 0, channels = 4;
  po::options_description options = command_options("read");
  options.add_options()("model", po::value(&model_dir)->required(),
                        "model directory (config.json + model.safetensors)")(
      "tokens", po::value(&tokens_text)->required(),
      "token ids, separated by spaces or commas, e.g. \"1 2 3\" or 1,2,3")(
      "token", po::value(&token)->required(), "the token position t to walk through (0 .. T-1)")(
      "read", po::value(&read),
      "the read r (0 .. L): the input of sublayer r + 1; L is the final read")(
      "sublayer", po::value(&sublayer),
      "or: the sublayer N (1 .. L) whose input read to walk through (read N - 1)")(
      "mode", po::value(&mode_text),
      "read the model's tensors as another mode: standard | full | block")(
      "block-size", po::value(&block_size), "override the block size S (sublayers, 1..L)")(
      "schedule-block", po::value(&schedule_block)->default_value(0),
      "Full AttnRes two-phase schedule block in sublayers (0: round(sqrt(L)))")(
      "zero-placeholder", "Block: add a zero source at each block's first sublayer")(
      "channels", po::value(&channels)->default_value(4),
      "channels of each vector the tables show (the JSON has every channel)")(
      "format", po::value(&format)->default_value("table"), "table | json");
  po::variables_map values;
  if (parse_or_help(
          args, options, values, out,
          "usage: attnres read --model DIR --tokens \"IDS\" --token T (--read R | --sublayer N) "
          "[--mode standard|full|block] [--block-size S] [--schedule-block K] "
          "[--zero-placeholder] [--channels K] [--format table|json]\n"
          "Every number of one depth read at one token: its sources with their RMS, keys, scores, "
          "the softmax (m, l, alpha) and the weighted sum h; for a two-phase read, phase 1, "
          "phase 2 and the online-softmax merge (docs/math.md §2.2-2.4).")) {
    return kExitOk;
  }
  require_either("--format", format, "table", "json");
  if (values.count("read") == values.count("sublayer")) {
    throw UsageError(values.count("read") ? "give --read R or --sublayer N, not both"
                                          : "give the read to walk through: --read R (0 .. L) or "
                                            "--sublayer N (1 .. L)");
  }
  if (channels < 1)
    throw UsageError("--channels must be at least 1, got " + std::to_string(channels));
  if (schedule_block < 0) {
    throw UsageError("--schedule-block must be >= 0, got " + std::to_string(schedule_block));
  }
  const std::vector<int> tokens =
      parse_flag_value([&] { return parse_token_ids(tokens_text, "--tokens"); });
  const auto T = static_cast<int>(tokens.size());
  if (token < 0 || token >= T) {
    std::string message = "--token ";
    message += std::to_string(token);
    message += " is out of range: --tokens has ";
    message += std::to_string(T);
    message += T == 1 ? " token (position 0)" : " tokens (positions 0 .. ";
    if (T > 1) {
      message += std::to_string(T - 1);
      message += ")";
    }
    throw UsageError(message);
  }

  ForwardOptions forward_options;
  forward_options.mode = parse_mode_flag(values, mode_text);
  if (forward_options.mode && *forward_options.mode != ResidualMode::standard &&
      *forward_options.mode != ResidualMode::full && *forward_options.mode != ResidualMode::block) {
    throw UsageError("--mode must be standard, full or block for a step-by-step read, got '" +
                     mode_text + "'");
  }
  forward_options.zero_placeholder = values.count("zero-placeholder") > 0;
  forward_options.full_schedule_block = schedule_block;

  const ModelWeights<double> model = load_model(model_dir);
  const int L = model.config.sublayers();
  if (values.count("read") && (read < 0 || read > L)) {
    throw UsageError("--read " + std::to_string(read) +
                     " is out of range: the model has reads 0 .. " + std::to_string(L) +
                     " (L = " + std::to_string(L) +
                     " sublayers; read r forms the input of sublayer r + 1, read " +
                     std::to_string(L) + " is the final read)");
  }
  if (values.count("sublayer")) {
    if (sublayer < 1 || sublayer > L) {
      throw UsageError("--sublayer " + std::to_string(sublayer) +
                       " is out of range: the model has sublayers 1 .. " + std::to_string(L) +
                       " (the final read is --read " + std::to_string(L) + ")");
    }
    read = sublayer - 1;
  }
  const auto [mode, mode_source] =
      apply_block_size_flag(values, mode_text, block_size, model.config, forward_options);
  if (forward_options.zero_placeholder && mode != ResidualMode::block) {
    throw UsageError("--zero-placeholder applies to Block AttnRes, but " + mode_source +
                     " is not block");
  }
  if (given(values, "schedule-block")) {
    if (mode != ResidualMode::full) {
      throw UsageError("--schedule-block applies to Full AttnRes, but " + mode_source +
                       " is not full");
    }
    if (schedule_block > L) {
      throw UsageError("--schedule-block " + std::to_string(schedule_block) +
                       " is larger than L = " + std::to_string(L) + " sublayers");
    }
  }
  const ReadWalkthrough walkthrough = read_walkthrough(model, tokens, token, read, forward_options);
  if (format == "json") {
    out << walkthrough_json(walkthrough, model_dir, tokens).dump(2) << "\n";
  } else {
    print_walkthrough(out, walkthrough, model_dir, model.config, channels);
  }
  return kExitOk;
}

}  // namespace attnres::cli

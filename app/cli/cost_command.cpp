// attnres cost: every cost of the residual schemes for one setting (memory I/O, history, prefill
// memory, pipeline traffic, FLOPs), and with --scheme the comparison of chosen schemes: how a
// scheme spec and the flags that refine it are parsed, costed and printed (docs/scheme-costs.md).
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "attnres/cost.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/format.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/report.hpp"
#include "cli.hpp"
#include "cost_input_flags.hpp"
#include "options.hpp"
#include "table_output.hpp"
#include "text_table.hpp"

namespace attnres::cli {

namespace {

// ------------------------------------------------------------------ schemes (docs/scheme-costs.md)

// The attn_res keys a scheme flag sets, and the flag.
const std::vector<std::pair<std::string, std::string>>& scheme_key_flags() {
  static const std::vector<std::pair<std::string, std::string>> flags = {
      {"gate", "--gate"},
      {"key_norm", "--key-norm"},
      {"window", "--window"},
      {"heads", "--depth-heads"},
      {"query_source", "--query-source"},
      {"mixing", "--mixing"},
      {"dynamic", "--dynamic"},
      {"sinkhorn_iterations", "--sinkhorn-iterations"}};
  return flags;
}

// --scheme, --compare and the flags that refine --scheme.
struct SchemeFlags {
  std::string scheme;
  std::vector<std::string> compare;
  std::string gate, key_norm, query_source, mixing, dynamic;
  int window = 0, depth_heads = 1, sinkhorn_iterations = 20;
  void add_to(po::options_description& options) {
    options.add_options()("scheme", po::value(&scheme),
                          "cost one scheme, NAME[:key=value,...] (see below), or 'all' for every "
                          "named scheme; prints the "
                          "scheme comparison instead of the full report")(
        "compare", po::value(&compare),
        "a scheme to print beside --scheme (NAME[:key=value,...]; repeat for more)")(
        "gate", po::value(&gate), "refines --scheme: softmax | sigmoid | sigmoid_normalized")(
        "key-norm", po::value(&key_norm), "refines --scheme: on | off")(
        "window", po::value(&window),
        "refines --scheme: the embedding plus the last W outputs (Full)")(
        "depth-heads", po::value(&depth_heads),
        "refines --scheme: depth-attention heads H (divides d)")(
        "query-source", po::value(&query_source), "refines --scheme: static | input")(
        "mixing", po::value(&mixing), "refines --scheme: attention | scalars")(
        "dynamic", po::value(&dynamic), "refines --scheme (mHC): on | off")(
        "sinkhorn-iterations", po::value(&sinkhorn_iterations),
        "refines --scheme (mHC): Sinkhorn iterations");
  }
};

std::string scheme_help() {
  std::string text =
      "\n\nSchemes (docs/scheme-costs.md): --scheme and --compare take "
      "NAME[:key=value[,key=value...]].\n"
      "  NAME: ";
  std::size_t column = 8;
  const auto& names = scheme_names();
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (column + names[i].size() > 96) {
      text += "\n        ";
      column = 8;
    }
    text += names[i];
    if (i + 1 < names.size()) text += ", ";
    column += names[i].size() + 2;
  }
  text +=
      "\n  keys: block_size, gate, key_norm, window, heads, query_source, mixing, streams, "
      "dynamic,\n"
      "        sinkhorn_iterations (the attn_res keys of config.json; booleans true/false or "
      "on/off)\n"
      "  Sizes come from the model flags (Block: --block-size or --blocks; mHC: --streams).\n"
      "  e.g. attnres cost --sublayers 128 --blocks 8 --d-model 7168 --scheme block --gate sigmoid "
      "--compare full\n"
      "       attnres cost --sublayers 128 --blocks 8 --d-model 7168 --scheme block:block_size=4 "
      "--compare mhc:dynamic=false\n"
      "       attnres cost --sublayers 128 --blocks 8 --d-model 7168 --scheme all --format "
      "markdown\n";
  return text;
}

// The keys a spec string sets after its ':'.
std::vector<std::string> spec_keys_of(const std::string& spec) {
  std::vector<std::string> keys;
  const auto colon = spec.find(':');
  if (colon == std::string::npos) return keys;
  std::stringstream items(spec.substr(colon + 1));
  for (std::string item; std::getline(items, item, ',');)
    keys.push_back(item.substr(0, item.find('=')));
  return keys;
}

struct SchemeRow {
  std::string label;  // what the user typed (or the named scheme)
  SchemeCost cost;
};

// Parses `spec` (given to `flag`), refined by the scheme flags when `refine` is set, and costs it.
// Every error names the flag that holds the offending value.
SchemeRow cost_scheme(const std::string& spec, const std::string& flag, const CostInputs& in,
                      const po::variables_map* refine, const SchemeFlags* flags) {
  std::vector<std::string> typed = spec_keys_of(spec);
  std::map<std::string, std::string> flag_of;  // attn_res key -> the flag that set it
  AttnResConfig config;
  try {
    config = parse_scheme_spec(spec, in);
  } catch (const CostInputError& error) {
    throw UsageError(flag + ": " + error.what());
  }
  std::string label = spec;
  if (refine) {
    for (const auto& entry : scheme_key_flags()) {
      // Plain references, not a structured binding: the lambda below captures them (clang 14
      // cannot capture structured bindings).
      const std::string& key = entry.first;
      const std::string& key_flag = entry.second;
      if (!given(*refine, key_flag.c_str() + 2)) continue;
      if (std::find(typed.begin(), typed.end(), key) != typed.end()) {
        throw UsageError(key_flag + " and '" + key + "=' in " + flag + " '" + spec +
                         "' contradict each other (give one)");
      }
      flag_of[key] = key_flag;
      parse_flag_value([&] {
        if (key == "gate") config.gate = parse_depth_gate(flags->gate, key_flag);
        if (key == "key_norm") config.key_norm = on_off(key_flag, flags->key_norm);
        if (key == "window") config.window = flags->window;
        if (key == "heads") config.heads = flags->depth_heads;
        if (key == "query_source")
          config.query_source = parse_query_source(flags->query_source, key_flag);
        if (key == "mixing") config.mixing = parse_depth_mixing(flags->mixing, key_flag);
        if (key == "dynamic") config.dynamic = on_off(key_flag, flags->dynamic);
        if (key == "sinkhorn_iterations") config.sinkhorn_iterations = flags->sinkhorn_iterations;
        return 0;
      });
    }
  }
  if (auto problem = scheme_problem(config, in)) {
    std::string where = flag;
    if (auto it = flag_of.find(problem->field); it != flag_of.end()) where = it->second;
    throw UsageError(where + ": " + problem->message);
  }
  SchemeRow row{label, scheme_cost(config, in)};
  if (!flag_of.empty()) row.label = row.cost.spec;  // the flags are part of the scheme's name
  return row;
}

std::string two_phase_text(const SchemeCost& c) {
  return c.two_phase ? c.two_phase_reason : "does not apply: " + c.two_phase_reason;
}

std::string x_d(double elements, std::int64_t d) {
  return format_number(elements / static_cast<double>(d));
}

// The comparison table: one row per scheme.
ReportTable scheme_table(const std::vector<SchemeRow>& rows, const CostInputs& in) {
  ReportTable table;
  table.id = "schemes";
  table.title = "Residual schemes at L = " + std::to_string(in.sublayers) +
                ", N = " + std::to_string(in.blocks) + " (S = " + std::to_string(in.block_size) +
                "), d = " + std::to_string(in.d_model) + ", m = " + std::to_string(in.streams) +
                ", " + to_string(in.dtype) + " (docs/scheme-costs.md)";
  table.header = {"scheme",
                  "I/O (x d)",
                  "I/O formula",
                  "reads (x d)",
                  "writes (x d)",
                  "history (vectors)",
                  "history (bytes/token)",
                  "params",
                  "mixing FLOP/token",
                  "two-phase"};
  for (const auto& row : rows) {
    const SchemeCost& c = row.cost;
    table.rows.push_back({row.label, x_d(c.io.total(), in.d_model), c.io_formula,
                          x_d(c.io.reads, in.d_model), x_d(c.io.writes, in.d_model),
                          std::to_string(c.history_vectors), format_number(c.history_bytes),
                          format_number(c.params), format_number(c.mixing_flops),
                          c.two_phase ? "yes" : "no"});
  }
  table.note =
      "I/O per token per sublayer, residual mechanism only (paper Table 1); params for the whole "
      "model; "
      "FLOPs per token for the whole forward (L sublayers and the final read).";
  return table;
}

// How each row is counted: schedule, formulas, the two-phase reason.
ReportTable scheme_formula_table(const std::vector<SchemeRow>& rows) {
  ReportTable table;
  table.id = "scheme_formulas";
  table.title = "How each row is counted";
  table.header = {"scheme", "description",  "I/O schedule", "history",
                  "params", "mixing FLOPs", "two-phase"};
  for (const auto& row : rows) {
    const SchemeCost& c = row.cost;
    table.rows.push_back({row.label, c.description, c.io_schedule, c.history_formula,
                          c.params_formula, c.flops_formula, two_phase_text(c)});
  }
  return table;
}

std::string ratio(double b, double a) {
  return a == 0 ? "n/a" : "x" + format_number(b / a);
}

std::string signed_number(double value) {
  return (value >= 0 ? "+" : "") + format_number(value);
}

// "B vs A: ..." for every --compare scheme.
std::vector<std::string> comparison_lines(const std::vector<SchemeRow>& rows,
                                          const CostInputs& in) {
  std::vector<std::string> lines;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const SchemeCost &a = rows[0].cost, &b = rows[i].cost;
    std::string line = rows[i].label;
    line += " vs ";
    line += rows[0].label;
    line += ": I/O " + ratio(b.io.total(), a.io.total()) + " (" + x_d(b.io.total(), in.d_model) +
            "d vs " + x_d(a.io.total(), in.d_model) + "d), history " +
            ratio(static_cast<double>(b.history_vectors), static_cast<double>(a.history_vectors)) +
            ", params " + signed_number(b.params - a.params) + ", mixing FLOPs " +
            ratio(b.mixing_flops, a.mixing_flops) + ", two-phase " + (a.two_phase ? "yes" : "no") +
            " -> " + (b.two_phase ? "yes" : "no");
    lines.push_back(line);
  }
  return lines;
}

// Every named scheme, as rows.
std::vector<SchemeRow> named_scheme_rows(const CostInputs& in) {
  std::vector<SchemeRow> rows;
  for (const auto& name : scheme_names())
    rows.push_back({name, scheme_cost(named_scheme(name, in), in)});
  return rows;
}

// --format json of the comparison: every scheme's costs, and the ratios of each --compare.
nlohmann::json schemes_json(const std::vector<SchemeRow>& rows, const CostInputs& in) {
  // Keyed by name, as "schemes" of attnres cost --format json.
  nlohmann::json schemes = nlohmann::json::object(), order = nlohmann::json::array(),
                 comparisons = nlohmann::json::array();
  for (const auto& row : rows) {
    schemes[row.label] = scheme_cost_to_json(row.cost, in.d_model);
    order.push_back(row.label);
  }
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const SchemeCost &a = rows[0].cost, &b = rows[i].cost;
    auto quotient = [](double x, double y) {
      return y == 0 ? nlohmann::json(nullptr) : nlohmann::json(x / y);
    };
    comparisons.push_back({{"a", rows[0].label},
                           {"b", rows[i].label},
                           {"io_ratio", quotient(b.io.total(), a.io.total())},
                           {"history_ratio", quotient(static_cast<double>(b.history_vectors),
                                                      static_cast<double>(a.history_vectors))},
                           {"params_difference", b.params - a.params},
                           {"mixing_flop_ratio", quotient(b.mixing_flops, a.mixing_flops)}});
  }
  nlohmann::json json = {{"schema", schema_tag("cost_schemes")},
                         {"inputs", {{"model", cost_inputs_to_json(in)}}},
                         {"order", order},
                         {"schemes", schemes}};
  if (rows.size() > 1 && !comparisons.empty()) json["comparisons"] = comparisons;
  return json;
}

// --format csv of the comparison: one row per scheme, every number and formula.
ReportTable schemes_csv_table(const std::vector<SchemeRow>& rows, const CostInputs& in) {
  ReportTable table = typed_table("schemes", "Residual schemes",
                                  {{"scheme", "scheme", Shown::text},
                                   {"spec", "spec", Shown::text},
                                   {"io_reads_elements_per_sublayer", "", Shown::number},
                                   {"io_writes_elements_per_sublayer", "", Shown::number},
                                   {"io_total_elements_per_sublayer", "", Shown::number},
                                   {"io_multiples_of_d", "", Shown::number},
                                   {"io_formula", "", Shown::text},
                                   {"io_schedule", "", Shown::text},
                                   {"io_one_shot_total_elements_per_sublayer", "", Shown::number},
                                   {"io_one_shot_formula", "", Shown::text},
                                   {"history_vectors_per_token", "", Shown::integer},
                                   {"history_bytes_per_token", "", Shown::number},
                                   {"history_formula", "", Shown::text},
                                   {"params", "", Shown::number},
                                   {"params_formula", "", Shown::text},
                                   {"mixing_flop_per_token", "", Shown::number},
                                   {"mixing_flop_per_token_per_sublayer", "", Shown::number},
                                   {"mixing_flop_formula", "", Shown::text},
                                   {"two_phase", "", Shown::yes_no},
                                   {"two_phase_reason", "", Shown::text}});
  const double d = static_cast<double>(in.d_model);
  for (const auto& row : rows) {
    const SchemeCost& c = row.cost;
    add_row(table, {row.label,
                    c.spec,
                    c.io.reads,
                    c.io.writes,
                    c.io.total(),
                    c.io.total() / d,
                    c.io_formula,
                    c.io_schedule,
                    c.io_one_shot.total(),
                    c.io_one_shot_formula,
                    c.history_vectors,
                    c.history_bytes,
                    c.history_formula,
                    c.params,
                    c.params_formula,
                    c.mixing_flops,
                    c.mixing_flops_per_sublayer,
                    c.flops_formula,
                    c.two_phase,
                    c.two_phase_reason});
  }
  return table;
}

// The terminal comparison: the table, how each row is counted, and the "B vs A" lines.
void print_schemes_text(std::ostream& out, const std::vector<SchemeRow>& rows,
                        const ReportTable& table, const std::vector<std::string>& lines) {
  out << table.title << "\n";
  TextTable text(table.header);
  for (const auto& row : table.rows) text.add_row(row);
  text.print(out);
  out << "  " << table.note << "\n\n";
  for (const auto& row : rows) {
    const SchemeCost& c = row.cost;
    out << row.label << ": " << c.description << "\n"
        << "  I/O: " << c.io_schedule << ": " << c.io_formula << "\n"
        << "  history: " << c.history_formula << "; params: " << c.params_formula << "\n"
        << "  mixing FLOPs: " << c.flops_formula << "\n"
        << "  two-phase: " << two_phase_text(c) << "\n";
  }
  if (!lines.empty()) out << "\n";
  for (const auto& line : lines) out << line << "\n";
}

// attnres cost --scheme ...: the comparison in the chosen format.
void print_schemes(std::ostream& out, const std::vector<SchemeRow>& rows, const CostInputs& in,
                   const std::string& format) {
  // comparison_lines quote rows[0], the --scheme every --compare is set against.
  const std::vector<std::string> lines = comparison_lines(rows, in);
  if (format == "json") {
    out << schemes_json(rows, in).dump(2) << "\n";
  } else if (format == "csv") {
    out << table_csv(schemes_csv_table(rows, in));
  } else if (format == "markdown") {
    print_markdown_tables(out, {scheme_table(rows, in), scheme_formula_table(rows)});
    for (const auto& line : lines) out << "- " << markdown_cell(line) << "\n";
  } else {
    print_schemes_text(out, rows, scheme_table(rows, in), lines);
  }
}

// The refining flags (--gate, --window, ...) and --compare need one --scheme NAME. Returns
// whether a refining flag was given.
bool check_scheme_flags(const po::variables_map& values, const SchemeFlags& schemes) {
  bool refining = false;
  for (const auto& [key, flag] : scheme_key_flags()) {
    if (!given(values, flag.c_str() + 2)) continue;
    if (schemes.scheme.empty()) {
      throw UsageError(flag + " refines --scheme; give --scheme NAME (e.g. --scheme block " + flag +
                       " ...)");
    }
    if (schemes.scheme == "all") {
      throw UsageError(flag +
                       " refines one scheme; --scheme all lists the named schemes as they are");
    }
    refining = true;
  }
  if (!schemes.compare.empty() && schemes.scheme.empty()) {
    throw UsageError("--compare needs --scheme (the scheme to compare against)");
  }
  if (!schemes.compare.empty() && schemes.scheme == "all") {
    throw UsageError(
        "--compare compares with one --scheme; --scheme all already lists every named scheme");
  }
  return refining;
}

// The rows of the comparison: every named scheme, or --scheme (refined) and each --compare.
std::vector<SchemeRow> scheme_rows(const SchemeFlags& schemes, const CostInputs& inputs,
                                   const po::variables_map* refine) {
  if (schemes.scheme == "all") return named_scheme_rows(inputs);
  std::vector<SchemeRow> rows;
  rows.push_back(cost_scheme(schemes.scheme, "--scheme", inputs, refine, &schemes));
  for (const auto& spec : schemes.compare)
    rows.push_back(cost_scheme(spec, "--compare", inputs, nullptr, nullptr));
  return rows;
}

// attnres cost without --scheme: the full report in the chosen format (CSV: the cost metrics).
void print_cost_report(std::ostream& out, const CostInputs& inputs, const std::string& format) {
  const CostReport report = evaluate_costs(inputs);
  if (format == "json") {
    nlohmann::json root = cost_report_to_json(report);
    root["schema"] = schema_tag("cost");
    out << root.dump(2) << "\n";
  } else if (format == "csv") {
    // One row per metric (the keys of attnres metrics), at full precision.
    ReportTable table = typed_table("cost_metrics", "Cost metrics",
                                    {{"metric", "metric", Shown::text},
                                     {"value", "value", Shown::number},
                                     {"unit", "unit", Shown::text}});
    const Evaluation evaluation{&report, nullptr, nullptr, nullptr};
    for (const auto& metric : cost_metrics()) {
      if (metric.needs != CostMetric::Needs::cost) continue;
      add_row(table, {metric.key, metric.value(evaluation), metric.unit});
    }
    out << table_csv(table);
  } else {
    std::vector<ReportTable> tables =
        cost_tables(report, {"io", "history", "prefill", "pipeline", "boundaries", "flops"});
    ReportTable every = scheme_table(named_scheme_rows(inputs), inputs);
    every.note +=
        " Formulas and reasons: --scheme all; one scheme against another: --scheme A --compare B.";
    tables.push_back(every);
    if (format == "markdown") {
      print_markdown_tables(out, tables);
    } else {
      print_tables(out, tables);
    }
  }
}

}  // namespace

int cost_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  InputFlags flags;
  flags.block_list = true;
  SchemeFlags schemes;
  TableFormat format;
  po::options_description options = command_options("cost");
  flags.add_to(options);
  schemes.add_to(options);
  add_table_format_option(options, format, false);
  po::variables_map values;
  if (parse_or_help(
          args, options, values, out,
          "usage: attnres cost (--sublayers L | --layers N) (--blocks N | --block-size S | "
          "--block-layers K | --block-sizes LIST) "
          "--d-model D [--ffn F] [--streams m] [--seq T] [--batch B] [--dtype bf16] [--pp P] "
          "[--vpp V] "
          "[--seq-shards k] [--chunk tokens] [--scheme SPEC|all [--compare SPEC ...] [--gate G] "
          "[--key-norm on|off] [--window W] [--depth-heads H] [--query-source static|input] "
          "[--mixing attention|scalars] [--dynamic on|off] [--sinkhorn-iterations I]] "
          "[--format table|markdown|json|csv] [model flags]" +
              scheme_help())) {
    return kExitOk;
  }
  require_table_format(format);
  const bool refining = check_scheme_flags(values, schemes);
  if (!schemes.scheme.empty())
    flags.refuse_unused(values, "the scheme comparison of --scheme", {"streams", "dtype"});
  else
    flags.refuse_unused(values, "the cost report",
                        {"streams", "ffn", "tokens", "batch", "dtype", "seq_shards", "chunk", "pp",
                         "vpp", "architecture"});
  const CostInputs inputs = flags.resolved();
  warn_stage_split(inputs, err);
  if (schemes.scheme.empty()) {
    print_cost_report(out, inputs, format.format);
  } else {
    print_schemes(out, scheme_rows(schemes, inputs, refining ? &values : nullptr), inputs,
                  format.format);
  }
  return kExitOk;
}

}  // namespace attnres::cli

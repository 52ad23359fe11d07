// attnres cost | scaling | sweep | report: the analytical cost engine on the command line.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <thread>

#include "attnres/atomic_file.hpp"
#include "attnres/block_layout.hpp"
#include "attnres/cost_input_fields.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/hardware.hpp"
#include "attnres/output_dir.hpp"
#include "attnres/pipeline.hpp"
#include "attnres/report.hpp"
#include "attnres/scenario.hpp"
#include "attnres/strategy_report.hpp"
#include "attnres/train_report.hpp"
#include "chart_render.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "progress.hpp"
#include "text_table.hpp"

namespace attnres::cli {

namespace fs = std::filesystem;

namespace {

// The model/sequence/parallelism flags shared by cost, sweep and pipeline, generated from the one
// table of cost inputs (cost_input_fields.hpp); engine errors name the flag the user typed.
struct InputFlags {
  CostInputs inputs;
  std::string dtype = "bf16";
  bool pipeline =
      false;  // pipeline: --micro-batch-size instead of --batch, no prefill or mHC flags
  bool d_model_required = true;  // off for `sweep`, whose --scenario gives the model instead
  bool block_list = false;       // --block-sizes LIST (uneven blocks): cost, strategies, layout
  std::string block_sizes;
  static std::string flag_name(const CostInputField& field, bool for_pipeline) {
    return for_pipeline && field.key == "batch" ? "micro-batch-size" : std::string(field.flag);
  }
  void add_to(po::options_description& options, bool for_pipeline = false) {
    pipeline = for_pipeline;
    const CostInputs defaults;
    po::options_description group("model flags");  // the usage lines' "[model flags]"
    for (const auto& field : cost_input_fields()) {
      if (for_pipeline && !field.pipeline_flag) continue;
      const std::string name = flag_name(field, for_pipeline);
      const std::string help = for_pipeline && field.key == "batch" ? "sequences per micro-batch"
                                                                    : std::string(field.help);
      auto* value = po::value(&(inputs.*field.member));
      if (defaults.*field.member != 0) value->default_value(defaults.*field.member);
      if (field.key == "d_model" && d_model_required) value->required();
      group.add_options()(name.c_str(), value, help.c_str());
      if (field.key == "block_layers" && block_list) {
        group.add_options()("block-sizes", po::value(&block_sizes),
                            "uneven blocks: sublayers per block, e.g. 6,6,4 (sum = L), instead of "
                            "blocks, block size or layers per block");
      }
      if (field.key == "tokens") {
        group.add_options()("dtype", po::value(&dtype)->default_value("bf16"),
                            "element type: bf16 | fp16 | fp32 | fp8");
      }
    }
    options.add(group);
  }
  // The flag that sets CostInputs field `key` ("--seq" for tokens).
  std::string flag_for_field(const std::string& key) const {
    if (key == "block_sizes") return "--block-sizes";
    const CostInputField* field = find_cost_input_field(key);
    return field ? "--" + flag_name(*field, pipeline) : key;
  }
  CostInputs resolved() {
    inputs.dtype = parse_flag_value([&] { return parse_dtype(dtype, "--dtype"); });
    if (!block_sizes.empty()) {
      inputs.block_sizes =
          parse_flag_value([&] { return parse_block_list(block_sizes, "--block-sizes"); });
    }
    try {
      return resolve_cost_inputs(inputs);
    } catch (const CostInputError& error) {
      throw UsageError(flag_for_field(error.field) + ": " + error.what());
    }
  }
};

std::ofstream open_output(const fs::path& path) {
  std::ofstream stream(path, std::ios::binary | std::ios::trunc);
  if (!stream)
    throw Error("cannot write '" + path.filename().string() + "': cannot create the file");
  return stream;
}

void close_output(std::ofstream& stream, const fs::path& path) {
  stream.flush();
  if (!stream)
    throw Error("cannot write '" + path.filename().string() + "': write failed (disk full?)");
  stream.close();
}

// The progress callback of a write phase: the bar's (so Ctrl-C stops it), plus the test hook.
Progress write_phase_progress(ProgressBar& bar) {
  return [&bar](std::size_t done, std::size_t total) {
    hold_for_tests("ATTNRES_TEST_HOLD_WRITE");  // tests interrupt the write phase here
    return bar.update(done, total);
  };
}

void print_tables(std::ostream& out, const std::vector<ReportTable>& tables) {
  for (const auto& table : tables) {
    out << table.title << "\n";
    TextTable text(table.header);
    for (const auto& row : table.rows) text.add_row(row);
    text.print(out);
    if (!table.note.empty()) {  // wrapped to the table's 120 columns
      TextTable note({table.note});
      std::ostringstream wrapped;
      note.print(wrapped, 118);
      std::istringstream lines(wrapped.str());
      for (std::string line; std::getline(lines, line);) out << "  " << line << "\n";
    }
    out << "\n";
  }
}

void require_format(const std::string& format, std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (format == a) return;
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  throw UsageError("--format must be one of " + list + ", got '" + format + "'");
}

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

bool on_off(const std::string& value, const std::string& flag) {
  if (value == "on") return true;
  if (value == "off") return false;
  throw UsageError(flag + " must be on or off, got '" + value + "'");
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
    for (const auto& [key, key_flag] : scheme_key_flags()) {
      if (!given(*refine, key_flag.c_str() + 2)) continue;
      if (std::find(typed.begin(), typed.end(), key) != typed.end()) {
        throw UsageError(key_flag + " and '" + key + "=' in " + flag + " '" + spec +
                         "' contradict each other (give one)");
      }
      flag_of[key] = key_flag;
      parse_flag_value([&] {
        if (key == "gate") config.gate = parse_depth_gate(flags->gate, key_flag);
        if (key == "key_norm") config.key_norm = on_off(flags->key_norm, key_flag);
        if (key == "window") config.window = flags->window;
        if (key == "heads") config.heads = flags->depth_heads;
        if (key == "query_source")
          config.query_source = parse_query_source(flags->query_source, key_flag);
        if (key == "mixing") config.mixing = parse_depth_mixing(flags->mixing, key_flag);
        if (key == "dynamic") config.dynamic = on_off(flags->dynamic, key_flag);
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

std::string markdown_cell(const std::string& cell) {
  std::string out;
  for (char c : cell) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

void print_markdown_tables(std::ostream& out, const std::vector<ReportTable>& tables) {
  for (const auto& table : tables) {
    out << "### " << markdown_cell(table.title) << "\n\n|";
    for (const auto& cell : table.header) out << " " << markdown_cell(cell) << " |";
    out << "\n|";
    for (std::size_t i = 0; i < table.header.size(); ++i) {
      // Numbers right-aligned, text (names, formulas, reasons) left-aligned.
      bool numeric = i > 0;
      for (const auto& row : table.rows) {
        if (i >= row.size() || row[i].empty()) continue;
        char* end = nullptr;
        std::strtod(row[i].c_str(), &end);
        if (end != row[i].c_str() + row[i].size()) numeric = false;
      }
      out << (numeric ? "---:|" : "---|");
    }
    out << "\n";
    for (const auto& row : table.rows) {
      out << "|";
      for (const auto& cell : row) out << " " << markdown_cell(cell) << " |";
      out << "\n";
    }
    if (!table.note.empty()) out << "\n" << table.note << "\n";
    out << "\n";
  }
}

// Every named scheme, as rows.
std::vector<SchemeRow> named_scheme_rows(const CostInputs& in) {
  std::vector<SchemeRow> rows;
  for (const auto& name : scheme_names())
    rows.push_back({name, scheme_cost(named_scheme(name, in), in)});
  return rows;
}

// attnres cost --scheme ...: the comparison in the chosen format.
void print_schemes(std::ostream& out, const std::vector<SchemeRow>& rows, const CostInputs& in,
                   const std::string& format) {
  const std::vector<std::string> lines = comparison_lines(rows, in);
  if (format == "json") {
    nlohmann::json schemes = nlohmann::json::array(), comparisons = nlohmann::json::array();
    for (const auto& row : rows) {
      nlohmann::json item = {{"name", row.label}};
      item.update(scheme_cost_to_json(row.cost, in.d_model));
      schemes.push_back(item);
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
                             {"mixing_flops_ratio", quotient(b.mixing_flops, a.mixing_flops)}});
    }
    nlohmann::json json = {{"inputs", cost_inputs_to_json(in)}, {"schemes", schemes}};
    if (rows.size() > 1 && !comparisons.empty()) json["comparisons"] = comparisons;
    out << json.dump(2) << "\n";
    return;
  }
  const std::vector<ReportTable> tables = {scheme_table(rows, in), scheme_formula_table(rows)};
  if (format == "csv") {
    ReportTable table;
    table.header = {"scheme",
                    "spec",
                    "io_reads",
                    "io_writes",
                    "io_total",
                    "io_multiples_of_d",
                    "io_formula",
                    "io_schedule",
                    "io_one_shot_total",
                    "io_one_shot_formula",
                    "history_vectors",
                    "history_bytes_per_token",
                    "history_formula",
                    "params",
                    "params_formula",
                    "mixing_flops_per_token",
                    "mixing_flops_per_sublayer",
                    "flops_formula",
                    "two_phase",
                    "two_phase_reason"};
    for (const auto& row : rows) {
      const SchemeCost& c = row.cost;
      table.rows.push_back({row.label,
                            c.spec,
                            format_number(c.io.reads),
                            format_number(c.io.writes),
                            format_number(c.io.total()),
                            x_d(c.io.total(), in.d_model),
                            c.io_formula,
                            c.io_schedule,
                            format_number(c.io_one_shot.total()),
                            c.io_one_shot_formula,
                            std::to_string(c.history_vectors),
                            format_number(c.history_bytes),
                            c.history_formula,
                            format_number(c.params),
                            c.params_formula,
                            format_number(c.mixing_flops),
                            format_number(c.mixing_flops_per_sublayer),
                            c.flops_formula,
                            c.two_phase ? "yes" : "no",
                            c.two_phase_reason});
    }
    out << table_csv(table);
    return;
  }
  if (format == "markdown") {
    print_markdown_tables(out, tables);
    for (const auto& line : lines) out << "- " << markdown_cell(line) << "\n";
    return;
  }
  out << tables[0].title << "\n";
  TextTable text(tables[0].header);
  for (const auto& row : tables[0].rows) text.add_row(row);
  text.print(out);
  out << "  " << tables[0].note << "\n\n";
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

}  // namespace

int cost_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  InputFlags flags;
  flags.block_list = true;
  SchemeFlags schemes;
  std::string format;
  po::options_description options("attnres cost options");
  options.add_options()("help,h", "show this help");
  flags.add_to(options);
  schemes.add_to(options);
  options.add_options()("format", po::value(&format)->default_value("table"),
                        "table | markdown | json | csv");
  auto values = parse_options(args, options);
  if (wants_help(
          values,
          "usage: attnres cost (--sublayers L | --layers N) (--blocks N | --block-size S | "
          "--block-layers K | --block-sizes LIST) "
          "--d-model D [--ffn F] [--streams m] [--seq T] [--batch B] [--dtype bf16] [--pp P] "
          "[--vpp V] "
          "[--seq-shards k] [--chunk tokens] [--scheme SPEC|all [--compare SPEC ...] [--gate G] "
          "[--key-norm on|off] [--window W] [--depth-heads H] [--query-source static|input] "
          "[--mixing attention|scalars] [--dynamic on|off] [--sinkhorn-iterations I]] "
          "[--format table|markdown|json|csv]" +
              scheme_help(),
          options, out)) {
    return kExitOk;
  }
  po::notify(values);
  require_format(format, {"table", "markdown", "json", "csv"});
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
  const CostInputs inputs = flags.resolved();
  if (!schemes.scheme.empty()) {
    std::vector<SchemeRow> rows;
    if (schemes.scheme == "all") {
      rows = named_scheme_rows(inputs);
    } else {
      rows.push_back(
          cost_scheme(schemes.scheme, "--scheme", inputs, refining ? &values : nullptr, &schemes));
      for (const auto& spec : schemes.compare)
        rows.push_back(cost_scheme(spec, "--compare", inputs, nullptr, nullptr));
    }
    print_schemes(out, rows, inputs, format);
    return kExitOk;
  }
  const CostReport report = evaluate_costs(inputs);
  if (format == "json") {
    out << cost_report_to_json(report).dump(2) << "\n";
  } else if (format == "csv") {
    out << "metric,value,unit\n";
    const Evaluation evaluation{&report, nullptr, nullptr, nullptr};
    for (const auto& metric : cost_metrics()) {
      if (metric.needs != CostMetric::Needs::cost) continue;
      out << metric.key << "," << format_number(metric.value(evaluation)) << "," << metric.unit
          << "\n";
    }
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
  return kExitOk;
}

int scaling_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  double target_loss = 1.695;
  std::string format;
  po::options_description options("attnres scaling options");
  options.add_options()("help,h", "show this help")(
      "target-loss", po::value(&target_loss)->default_value(1.695), "validation loss to reach")(
      "format", po::value(&format)->default_value("table"), "table | json | csv");
  auto values = parse_options(args, options);
  if (wants_help(values, "usage: attnres scaling [--target-loss x] [--format table|json|csv]",
                 options, out)) {
    return kExitOk;
  }
  po::notify(values);
  require_format(format, {"table", "json", "csv"});
  if (!(target_loss > 0.0 && std::isfinite(target_loss))) {
    throw UsageError("--target-loss must be a finite number > 0, got " +
                     format_number(target_loss));
  }
  Report report;
  add_scaling_section({target_loss, target_loss - 0.1, target_loss + 0.1}, report);
  if (format == "json") {
    nlohmann::json fits = nlohmann::json::array();
    for (const auto& fit : paper_scaling_fits())
      fits.push_back({{"name", fit.name}, {"A", fit.A}, {"a", fit.a}});
    nlohmann::json json = report.json["scaling"];
    json["fits"] = fits;
    json["units"] = "compute in PFLOP/s-days; multiplier = baseline compute / scheme compute";
    out << json.dump(2) << "\n";
  } else if (format == "csv") {
    out << table_csv(report.tables.front());
  } else {
    print_tables(out, {report.tables.front()});
  }
  return kExitOk;
}

// Flags given on the command line (not defaults) override a --scenario's inputs.
void override_from_flags(const InputFlags& flags, const po::variables_map& values, CostInputs& in) {
  for (const auto& field : cost_input_fields()) {
    const std::string name = InputFlags::flag_name(field, flags.pipeline);
    if (values.count(name) && !values[name].defaulted())
      set_cost_input(in, std::string(field.key), flags.inputs.*field.member);
  }
  if (values.count("dtype") && !values["dtype"].defaulted()) {
    in.dtype = parse_flag_value([&] { return parse_dtype(flags.dtype, "--dtype"); });
  }
}

int sweep_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  InputFlags flags;
  flags.d_model_required = false;  // checked below: a --scenario gives it too
  SweepSpec spec;
  std::string x_values, y_values, y_parameter, format, out_dir, scenario_path;
  std::vector<std::string> metrics;
  po::options_description options("attnres sweep options");
  options.add_options()("help,h", "show this help")(
      "scenario", po::value(&scenario_path),
      "take the model, [hardware], [moe] and [pipeline] of this scenario file as the base setting "
      "(model flags given as well override it); needed for time and pipeline metrics and for the "
      "microbatches and link_bandwidth_gbps parameters");
  flags.add_to(options);
  std::string parameters;
  for (const auto& name : sweep_parameters()) parameters += (parameters.empty() ? "" : ", ") + name;
  options.add_options()("x", po::value(&spec.x.parameter)->required(),
                        ("parameter to sweep: " + parameters).c_str())(
      "values", po::value(&x_values)->required(),
      "1,2,4 | divisors | FROM:TO[:STEP] | FROM:TO:xFACTOR")("y", po::value(&y_parameter),
                                                             "second parameter for a grid")(
      "y-values", po::value(&y_values), "values of the second parameter")(
      "metric", po::value(&metrics)->required(),
      "metric key (repeat; attnres metrics lists them, all in one unit)")(
      "name", po::value(&spec.name)->default_value("sweep"), "name of the output files")(
      "log-x", "logarithmic x axis")("log-y", "logarithmic y axis")(
      "format", po::value(&format)->default_value("csv"), "csv | json, printed (without --out)")(
      "out", po::value(&out_dir),
      "directory for NAME.csv, NAME.json and the chart NAME.png/.svg "
      "(new, empty, or written by attnres; other sweeps' files are kept)")(
      "force", "replace the contents of an --out directory that holds other files")(
      "max-points", po::value(&spec.max_points)->default_value(SweepSpec::kDefaultMaxSweepPoints),
      "refuse sweeps with more settings than this");
  auto values = parse_options(args, options);
  if (wants_help(values,
                 "usage: attnres sweep (--d-model D [model flags] | --scenario FILE [model flags]) "
                 "--x PARAM --values V [--y PARAM --y-values V] --metric KEY [--metric KEY ...] "
                 "[--name NAME] "
                 "[--log-x] [--log-y] [--max-points N] [--out DIR [--force] | --format csv|json]",
                 options, out)) {
    return kExitOk;
  }
  po::notify(values);
  require_format(format, {"csv", "json"});
  if (given(values, "format") && !out_dir.empty()) {
    throw UsageError("--format " + format + " prints the sweep; with --out both " + spec.name +
                     ".csv and " + spec.name + ".json are written (drop one of the two flags)");
  }
  if (values.count("force") && out_dir.empty()) throw UsageError("--force applies to --out");
  try {
    validate_output_name(spec.name, "--name");
  } catch (const Error& error) {
    throw UsageError(error.what());
  }
  if (spec.max_points < 1) throw UsageError("--max-points must be >= 1");
  ScenarioInputs base;
  if (scenario_path.empty()) {
    if (!values.count("d-model"))
      throw UsageError("the option '--d-model' is required but missing (or give --scenario)");
    base.cost = flags.resolved();
  } else {
    const Scenario scenario = load_scenario(scenario_path);
    if (!scenario.has_model)
      throw UsageError("--scenario: " + scenario_path + " has no [model] table");
    base = scenario.scenario_inputs();
    override_from_flags(flags, values, base.cost);
    try {
      base.cost = resolve_cost_inputs(base.cost);
    } catch (const CostInputError& error) {
      throw UsageError(flags.flag_for_field(error.field) + ": " + error.what() +
                       " (with the inputs of " + scenario_path + ")");
    }
    if (base.pipeline) base.pipeline->model = base.cost;
  }
  const bool has_pipeline = base.pipeline.has_value(), has_hardware = base.hardware.has_value();
  auto axis_values = [&](const std::string& text, const std::string& flag) {
    try {
      return parse_sweep_values(text, flag, base.cost.sublayers);
    } catch (const Error& error) {
      throw UsageError(error.what());
    }
  };
  for (const auto& [flag, parameter] :
       {std::pair<std::string, std::string>{"--x", spec.x.parameter}, {"--y", y_parameter}}) {
    if (parameter.empty()) continue;
    const std::string problem = sweep_parameter_problem(parameter, has_pipeline);
    if (!problem.empty()) {
      const bool missing_table = is_pipeline_sweep_parameter(parameter) && scenario_path.empty();
      throw UsageError(flag + ": " + problem +
                       (missing_table ? " (give --scenario with one)" : ""));
    }
  }
  spec.x.values = axis_values(x_values, "--values");
  if (!y_parameter.empty()) {
    if (y_values.empty()) throw UsageError("--y needs --y-values");
    if (y_parameter == spec.x.parameter) throw UsageError("--y must differ from --x");
    spec.y = SweepAxis{y_parameter, axis_values(y_values, "--y-values")};
  } else if (!y_values.empty()) {
    throw UsageError("--y-values needs --y (the second parameter of the grid)");
  }
  if (!spec.x.values.empty() && spec.y &&
      spec.y->values.size() > spec.max_points / spec.x.values.size()) {
    throw UsageError("--values x --y-values give " + std::to_string(spec.x.values.size()) + " x " +
                     std::to_string(spec.y->values.size()) + " settings, more than --max-points " +
                     std::to_string(spec.max_points) + " (raise --max-points to run it)");
  }
  if (spec.x.values.size() > spec.max_points) {
    throw UsageError("--values gives " + std::to_string(spec.x.values.size()) +
                     " settings, more than --max-points " + std::to_string(spec.max_points) +
                     " (raise --max-points to run it)");
  }
  std::string unit;
  for (const auto& key : metrics) {
    const std::string problem = sweep_metric_problem(key, has_hardware, has_pipeline, unit);
    if (!problem.empty()) {
      const bool missing_table = problem.find(" needs ") != std::string::npos;
      throw UsageError(
          "--metric: " + problem +
          (missing_table && scenario_path.empty() ? " (give --scenario with it)" : ""));
    }
    if (unit.empty()) unit = find_cost_metric(key)->unit;
  }
  spec.metrics = metrics;
  spec.log_x = values.count("log-x") > 0;
  spec.log_y = values.count("log-y") > 0;
  const nlohmann::json inputs_json = cost_inputs_to_json(base.cost);
  ProgressBar progress("sweep");
  SweepRun run;
  run.progress = progress.callback();
  if (out_dir.empty()) {  // printed, streamed row by row
    run.keep_points = false;
    if (format == "json") {
      SweepJsonWriter writer(out, spec, inputs_json);
      run.on_point = [&](const SweepPoint& point) { writer.point(point); };
      writer.end(run_sweep(base, spec, run));
    } else {
      out << sweep_csv_header(spec);
      run.on_point = [&](const SweepPoint& point) { out << sweep_csv_row(point); };
      run_sweep(base, spec, run);
    }
    return kExitOk;
  }
  OutputDirectoryOptions output;
  output.owner = "sweep:" + spec.name;
  output.force = values.count("force") > 0;
  output.progress = write_phase_progress(progress);
  if (!scenario_path.empty()) output.inputs = {fs::path(scenario_path)};
  const fs::path target = clean_output_path(out_dir, "--out");
  check_output_directory(target, output);  // refuse before the work, not after
  charts::ensure_application();            // before any staging folder exists
  SweepResult result;
  const OutputDirectoryResult written =
      write_output_directory(target, output, [&](const fs::path& dir) {
        std::ofstream csv = open_output(dir / (spec.name + ".csv"));
        std::ofstream json_file = open_output(dir / (spec.name + ".json"));
        SweepJsonWriter writer(json_file, spec, inputs_json);
        csv << sweep_csv_header(spec);
        run.keep_points = false;
        run.on_point = [&](const SweepPoint& point) {
          csv << sweep_csv_row(point);
          writer.point(point);
        };
        result = run_sweep(base, spec, run);
        writer.end(result);
        close_output(csv, dir / (spec.name + ".csv"));
        close_output(json_file, dir / (spec.name + ".json"));
        progress.set_label("chart");
        charts::render_chart_files(sweep_chart(result, base), dir / (spec.name + ".png"),
                                   dir / (spec.name + ".svg"));
        output.progress(1, 1);
      });
  out << "swept " << spec.x.parameter << (spec.y ? " x " + spec.y->parameter : "") << ": "
      << result.valid_count << " settings (" << result.skipped_count
      << " rejected as impossible); wrote " << (target / spec.name).string()
      << ".{csv,json,png,svg}\n";
  if (!result.decimated.empty()) out << "note: " << result.decimated << "\n";
  for (const auto& note : output_directory_notes(written)) out << "note: " << note << "\n";
  return kExitOk;
}

int pipeline_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  InputFlags flags;
  PipelineSettings settings;
  std::string schedule, cache, hardware, overlap, format, mode, link;
  double link_gbps = 0;
  po::options_description options("attnres pipeline options");
  options.add_options()("help,h", "show this help");
  flags.add_to(options, true);
  options.add_options()("microbatches", po::value(&settings.microbatches)->default_value(8),
                        "micro-batches m per iteration")(
      "schedule", po::value(&schedule), "1f1b | interleaved (default: interleaved when --vpp > 1)")(
      "cache", po::value(&cache)->default_value("cached"),
      "AttnRes history policy: naive | cached | cached_own")(
      "mode", po::value(&mode)->default_value("block"), "AttnRes variant: block | full")(
      "hardware", po::value(&hardware)->default_value("h100"),
      "preset (a100 h100 h200 b200) or a .toml file")("link",
                                                      po::value(&link)->default_value("scale-out"),
                                                      "pipeline link: scale-out | intra-node")(
      "link-bandwidth", po::value(&link_gbps), "override the link bandwidth, GB/s per direction")(
      "overlap", po::value(&overlap)->default_value("on"),
      "on: transfers overlap compute; off: the sender waits")(
      "ideal-links", "transfers cost nothing")("experts",
                                               po::value(&settings.moe.experts)->default_value(0),
                                               "MoE routed experts (0: dense MLP)")(
      "active-experts", po::value(&settings.moe.active)->default_value(0),
      "routed experts per token")(
      "shared-experts", po::value(&settings.moe.shared)->default_value(0), "always-on experts")(
      "expert-ffn", po::value(&settings.moe.expert_ffn)->default_value(0),
      "SwiGLU width of one expert")("format", po::value(&format)->default_value("table"),
                                    "table | json");
  auto values = parse_options(args, options);
  if (wants_help(values,
                 "usage: attnres pipeline (--sublayers L | --layers N) (--block-size S | --blocks "
                 "N | --block-layers K) --d-model D "
                 "[--ffn F] [--seq T] [--dtype bf16] [--micro-batch-size B] [--microbatches m] "
                 "[--pp P] [--vpp V] "
                 "[--mode block|full] [--schedule 1f1b|interleaved] [--cache naive|cached] "
                 "[--hardware h100|FILE.toml] "
                 "[--link scale-out|intra-node] [--link-bandwidth GBPS | --ideal-links] [--overlap "
                 "on|off] "
                 "[--experts E --active-experts K --expert-ffn F [--shared-experts S]] [--format "
                 "table|json]",
                 options, out)) {
    return kExitOk;
  }
  po::notify(values);
  require_format(format, {"table", "json"});
  settings.model = flags.resolved();
  parse_flag_value([&] {
    settings.schedule = values.count("schedule") ? parse_pipeline_schedule(schedule, "--schedule")
                                                 : default_pipeline_schedule(settings.model.vpp);
    settings.cache = parse_cache_policy(cache, "--cache");
    settings.mode = parse_residual_mode(mode, "--mode");
  });
  // A preset name is a flag value (exit 2 when unknown); a .toml file is an input file (exit 1
  // when it cannot be read or parsed).
  const bool hardware_file =
      fs::exists(hardware) || hardware.find('/') != std::string::npos ||
      (hardware.size() > 5 && hardware.substr(hardware.size() - 5) == ".toml");
  if (hardware_file) {
    settings.hardware = load_hardware(hardware);
  } else {
    settings.hardware = parse_flag_value([&] { return load_hardware(hardware); });
  }
  if (overlap != "on" && overlap != "off")
    throw UsageError("--overlap must be on or off, got '" + overlap + "'");
  if (link != "scale-out" && link != "intra-node")
    throw UsageError("--link must be scale-out or intra-node");
  settings.overlap = overlap == "on";
  settings.intra_node_link = link == "intra-node";
  settings.ideal_links = values.count("ideal-links") > 0;
  if (values.count("link-bandwidth")) {
    if (!(link_gbps > 0)) {
      throw UsageError("--link-bandwidth must be > 0 GB/s (use --ideal-links for free transfers)");
    }
    settings.link_bandwidth = link_gbps * 1e9;
  }
  for (const char* moe_flag : {"active-experts", "shared-experts", "expert-ffn"}) {
    if (given(values, moe_flag) && settings.moe.experts == 0) {
      throw UsageError(std::string("--") + moe_flag +
                       " describes a MoE MLP and needs --experts N (N >= 1)");
    }
  }
  if (given(values, "link-bandwidth") && values.count("ideal-links")) {
    throw UsageError(
        "--link-bandwidth and --ideal-links contradict each other (ideal links take no time)");
  }
  if (const auto problem = pipeline_settings_problem(settings)) {
    // The core's rule, under the flag of the setting it is about.
    static const std::map<std::string, std::string> setting_flags = {
        {"mode", "--mode"},
        {"microbatches", "--microbatches"},
        {"schedule", "--schedule"},
        {"link_bandwidth", "--link-bandwidth"},
        {"experts", "--experts"},
        {"active", "--active-experts"},
        {"shared", "--shared-experts"},
        {"expert_ffn", "--expert-ffn"}};
    throw UsageError(setting_flags.at(problem->field) + ": " + problem->message);
  }
  settings.record_timeline = format == "table";
  PipelineReport pipeline;
  parse_flag_value([&] { pipeline = evaluate_pipeline(settings); });
  const StackTime prefill =
      stack_time(settings.model, settings.moe, Phase::prefill, settings.hardware);
  const StackTime decode =
      stack_time(settings.model, settings.moe, Phase::decode, settings.hardware);
  if (format == "json") {
    nlohmann::json json = {{"iteration_time_s", pipeline.iteration_time_s},
                           {"standard_iteration_time_s", pipeline.standard.iteration_seconds},
                           {"bubble_fraction", pipeline.bubble_fraction},
                           {"bubble_denominator", "the busiest rank's compute time (ideal time)"},
                           {"closed_form_bubble", pipeline.closed_form_bubble},
                           {"exposed_comm_s", pipeline.exposed_comm_s},
                           {"attnres_overhead_fraction", pipeline.attnres_overhead_fraction},
                           {"peak_memory_bytes_per_rank", pipeline.peak_memory_bytes_per_rank},
                           {"peak_memory_bytes_by_rank", pipeline.attnres.peak_memory_bytes},
                           {"transferred_bytes", pipeline.attnres.transferred_bytes},
                           {"link_bandwidth_bytes_per_s", pipeline.link_bandwidth},
                           {"schedule", to_string(settings.schedule)},
                           {"cache", to_string(settings.cache)},
                           {"microbatches", settings.microbatches},
                           {"hardware", settings.hardware.name},
                           {"inputs", cost_inputs_to_json(settings.model)}};
    for (const auto* phase : {&prefill, &decode}) {
      nlohmann::json overhead;
      for (const auto& [scheme, name] : kResidualSchemeNames) {
        overhead[std::string(name)] = phase->overhead_fraction[static_cast<std::size_t>(scheme)];
      }
      json["time_model"][to_string(phase->phase)] = {
          {"stack_seconds_standard", phase->stack_seconds[0]}, {"overhead_fraction", overhead}};
    }
    out << json.dump(2) << "\n";
    return kExitOk;
  }
  Report report;
  add_pipeline_section(pipeline, report);
  report.tables.push_back(time_table(settings.model, prefill, decode, settings.hardware));
  print_tables(out, report.tables);
  return kExitOk;
}

int metrics_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  std::string format;
  po::options_description options("attnres metrics options");
  options.add_options()("help,h", "show this help")(
      "format", po::value(&format)->default_value("table"), "table | markdown");
  auto values = parse_options(args, options);
  if (wants_help(values, "usage: attnres metrics [--format table|markdown]", options, out))
    return kExitOk;
  po::notify(values);
  require_format(format, {"table", "markdown"});
  auto needs = [](const CostMetric& metric) {
    switch (metric.needs) {
      case CostMetric::Needs::cost:
        return "model";
      case CostMetric::Needs::time:
        return "[hardware]";
      case CostMetric::Needs::pipeline:
        return "[pipeline]";
    }
    return "";
  };
  if (format == "markdown") {
    out << "| key | unit | needs | meaning |\n|---|---|---|---|\n";
    for (const auto& metric : cost_metrics()) {
      out << "| `" << metric.key << "` | " << metric.unit << " | " << needs(metric) << " | "
          << metric.description << " |\n";
    }
    return kExitOk;
  }
  TextTable table({"key", "unit", "needs", "meaning"});
  for (const auto& metric : cost_metrics())
    table.add_row({metric.key, metric.unit, needs(metric), metric.description});
  table.print(out);
  return kExitOk;
}

int report_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  std::string scenario_path, out_dir;
  int train_steps = 0;
  po::options_description options("attnres report options");
  options.add_options()("help,h", "show this help")("scenario",
                                                    po::value(&scenario_path)->required(),
                                                    "scenario TOML file (or the first argument)")(
      "out", po::value(&out_dir)->required(),
      "report directory: new, empty, or written by attnres (its previous report is replaced)")(
      "force",
      "replace the contents of an --out directory that holds other files (never the scenario)")(
      "train-steps", po::value(&train_steps)->default_value(0),
      "train every [train] run for this many steps instead of the scenario's (a quick look; 0: as "
      "written)");
  po::positional_options_description positional;
  positional.add("scenario", 1);
  auto values = parse_options(args, options, &positional);
  if (wants_help(values,
                 "usage: attnres report (SCENARIO.toml | --scenario SCENARIO.toml) --out DIR "
                 "[--force] [--train-steps N]",
                 options, out)) {
    return kExitOk;
  }
  po::notify(values);
  if (train_steps < 0)
    throw UsageError("--train-steps must be >= 0 (0: the scenario's steps), got " +
                     std::to_string(train_steps));
  OutputDirectoryOptions output;
  output.force = values.count("force") > 0;
  output.inputs = {fs::path(scenario_path)};
  output.owner = "report";
  const fs::path target = clean_output_path(out_dir, "--out");
  const Scenario scenario = load_scenario(scenario_path);
  if (given(values, "train-steps") && !scenario.training) {
    throw UsageError("--train-steps applies to scenarios with a [train] table; " + scenario_path +
                     " has none");
  }
  const bool train = scenario.training &&
                     std::find(scenario.sections.begin(), scenario.sections.end(), "training") !=
                         scenario.sections.end();
  if (train) output.inputs.push_back(scenario.training->data_path);
  check_output_directory(target, output);  // refuse before the work, not after
  charts::ensure_application();            // before any staging folder exists
  ProgressBar progress("report");
  Report report = build_report(scenario, progress.callback());
  if (train) {
    // Tiny models trained on the scenario's data (docs/training.md): measured losses beside the
    // costs.
    progress.set_label("training");
    const auto runs = run_scenario_training(*scenario.training, progress.callback(), train_steps);
    add_training_section(*scenario.training, runs, report);
  }
  progress.set_label("writing");
  output.progress = write_phase_progress(progress);
  const OutputDirectoryResult written = write_report(
      report, target,
      [](const ChartSpec& chart, const fs::path& png, const fs::path& svg) {
        charts::render_chart_files(chart, png, svg);
      },
      output);
  out << "wrote " << (target / "report.md").string() << ": " << report.tables.size() << " tables, "
      << report.charts.size() << " charts (PNG + SVG), report.json\n";
  for (const auto& note : report.notes) out << "note: " << printable_text(note) << "\n";
  for (const auto& note : output_directory_notes(written)) out << "note: " << note << "\n";
  return kExitOk;
}

namespace {

// The v2 commands' output: the terminal table, Markdown, CSV (one table) or JSON (every table).
nlohmann::json tables_json(const std::vector<ReportTable>& tables) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& table : tables) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : table.rows) {
      nlohmann::json entry = nlohmann::json::object();
      for (std::size_t i = 0; i < row.size() && i < table.header.size(); ++i)
        entry[table.header[i]] = row[i];
      rows.push_back(std::move(entry));
    }
    list.push_back(
        {{"id", table.id}, {"title", table.title}, {"rows", rows}, {"note", table.note}});
  }
  return {{"tables", list}};
}

void print_in_format(std::ostream& out, const std::vector<ReportTable>& tables,
                     const std::string& format) {
  if (format == "json") {
    out << tables_json(tables).dump(2) << "\n";
  } else if (format == "csv") {
    for (const auto& table : tables) out << table_csv(table);
  } else if (format == "markdown") {
    print_markdown_tables(out, tables);
  } else {
    print_tables(out, tables);
  }
}

ResidualMode strategy_mode(const std::string& mode) {
  const ResidualMode parsed = parse_flag_value([&] { return parse_residual_mode(mode, "--mode"); });
  if (parsed != ResidualMode::block && parsed != ResidualMode::full)
    throw UsageError("--mode: implementation strategies apply to block or full, got '" + mode +
                     "'");
  return parsed;
}

}  // namespace

int strategies_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  InputFlags flags;
  flags.block_list = true;
  std::string mode, hardware, format, strategy, scheme_text;
  po::options_description options("attnres strategies options");
  options.add_options()("help,h", "show this help");
  flags.add_to(options);
  options.add_options()("mode", po::value(&mode)->default_value("block"),
                        "AttnRes variant: block | full")(
      "scheme", po::value(&scheme_text),
      "any scheme with depth reads instead of --mode, e.g. full_window, block:key_norm=off, "
      "denseformer (docs/schemes.md)")(
      "hardware", po::value(&hardware)->default_value("h100"),
      "preset (a100 b200 gb300 h100 h200 rtx5090) or a .toml file")(
      "calls", po::value(&strategy),
      "also list every kernel call of one strategy (stack | arena | fused_one_shot | "
      "fused_two_phase) with its bytes and time for one micro-batch")(
      "format", po::value(&format)->default_value("table"), "table | markdown | json | csv");
  auto values = parse_options(args, options);
  if (wants_help(
          values,
          "usage: attnres strategies (--sublayers L | --layers N) (--blocks N | --block-size "
          "S | --block-layers K | --block-sizes LIST) --d-model D [model flags] "
          "[--mode block|full | --scheme SPEC] [--hardware h100|FILE.toml] [--calls STRATEGY] "
          "[--format table|markdown|json|csv]\n"
          "Bytes, launches, temporary and saved memory of each implementation strategy "
          "(stack, arena, fused one-shot, fused two-phase), forward and backward, and what "
          "each adds to a training step and a decode step (docs/math.md §3.6).",
          options, out)) {
    return kExitOk;
  }
  po::notify(values);
  require_format(format, {"table", "markdown", "json", "csv"});
  if (given(values, "mode") && values.count("scheme"))
    throw UsageError("--mode and --scheme both choose the scheme; give one");
  const CostInputs inputs = flags.resolved();
  AttnResConfig scheme;
  if (values.count("scheme")) {
    scheme = parse_flag_value([&] {
      AttnResConfig parsed = parse_scheme_spec(scheme_text, inputs);
      if (auto problem = scheme_problem(parsed, inputs))
        throw Error("--scheme: " + problem->message);
      try {
        read_ops_of(parsed);
      } catch (const Error& error) {
        throw Error(std::string("--scheme: ") + error.what());
      }
      return parsed;
    });
  } else {
    scheme.mode = strategy_mode(mode);
  }
  const Hardware hw = parse_flag_value([&] { return load_hardware(hardware); });
  std::vector<ReportTable> tables = {strategies_table(scheme, inputs, {}, hw),
                                     decode_table(scheme, inputs, {}, hw)};
  if (values.count("calls")) {
    const Strategy picked = parse_flag_value([&] { return parse_strategy(strategy, "--calls"); });
    const StrategyCost cost =
        parse_flag_value([&] { return scheme_strategy_cost(picked, scheme, inputs); });
    const double tokens = static_cast<double>(inputs.batch) * static_cast<double>(inputs.tokens);
    const int b = bytes_per_element(inputs.dtype);
    ReportTable calls{"calls_" + to_string(picked),
                      "Every kernel call of " + to_string(picked) + " for one micro-batch",
                      {"pass", "op", "read r", "launches", "read (vectors)", "write (vectors)",
                       "bytes", "time (us)", "bound"},
                      {},
                      "",
                      ""};
    auto add = [&](const char* pass, const std::vector<KernelCall>& list) {
      for (const auto& call : list) {
        const double bytes =
            static_cast<double>(call.vectors()) * static_cast<double>(inputs.d_model) * tokens * b;
        const double seconds = call_seconds(bytes, hw);
        calls.rows.push_back({pass, call.op, std::to_string(call.read), std::to_string(call.count),
                              std::to_string(call.read_vectors), std::to_string(call.write_vectors),
                              format_number(bytes), format_number(std::round(seconds * 1e9) / 1e3),
                              seconds <= hw.kernel_floor ? "floor" : "bandwidth"});
      }
    };
    add("forward", cost.forward_calls);
    add("backward", cost.backward_calls);
    calls.note =
        "Each row is `launches` calls of one shape (per launch: vectors, bytes, time). Vectors are "
        "d-wide per token; bytes = vectors x d x B·T x b; time = max(floor, "
        "bytes / (bandwidth x efficiency)).";
    tables.push_back(std::move(calls));
  }
  print_in_format(out, tables, format);
  return kExitOk;
}

int layout_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  InputFlags flags;
  flags.block_list = true;
  std::string format;
  po::options_description options("attnres layout options");
  options.add_options()("help,h", "show this help");
  flags.add_to(options);
  options.add_options()("format", po::value(&format)->default_value("table"),
                        "table | markdown | json | csv");
  auto values = parse_options(args, options);
  if (wants_help(values,
                 "usage: attnres layout (--sublayers L | --layers N) (--blocks N | --block-size S "
                 "| --block-layers K | --block-sizes LIST) --d-model D [--pp P] [--vpp V] "
                 "[model flags] [--format table|markdown|json|csv]\n"
                 "Every block with its sublayers, transformer layers and sources per read, against "
                 "the pipeline's stage boundaries, and the exact payload of every boundary "
                 "(docs/math.md §3.3, §3.6).",
                 options, out)) {
    return kExitOk;
  }
  po::notify(values);
  require_format(format, {"table", "markdown", "json", "csv"});
  const CostInputs inputs = flags.resolved();
  std::vector<ReportTable> tables = {layout_table(inputs)};
  if (inputs.pp * inputs.vpp > 1) {
    tables.push_back(cost_tables(evaluate_costs(inputs), {"boundaries"}).front());
  }
  print_in_format(out, tables, format);
  return kExitOk;
}

int recompute_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  InputFlags flags;
  flags.block_list = true;
  std::string mode, strategy, format;
  po::options_description options("attnres recompute options");
  options.add_options()("help,h", "show this help");
  flags.add_to(options);
  options.add_options()("mode", po::value(&mode)->default_value("block"),
                        "AttnRes variant: block | full")(
      "strategy", po::value(&strategy)->default_value("fused_one_shot"),
      "stack | arena | fused_one_shot | fused_two_phase (its saved tensors)")(
      "format", po::value(&format)->default_value("table"), "table | markdown | json | csv");
  auto values = parse_options(args, options);
  if (wants_help(values,
                 "usage: attnres recompute (--sublayers L | --layers N) (--blocks N | --block-size "
                 "S | --block-layers K | --block-sizes LIST) --d-model D [--pp P] [--vpp V] "
                 "[model flags] [--mode block|full] [--strategy S] "
                 "[--format table|markdown|json|csv]\n"
                 "Memory per pipeline rank and recompute FLOPs with and without activation "
                 "checkpointing, block summaries kept or recomputed (docs/math.md §3.6).",
                 options, out)) {
    return kExitOk;
  }
  po::notify(values);
  require_format(format, {"table", "markdown", "json", "csv"});
  const ResidualMode residual = strategy_mode(mode);
  const Strategy picked = parse_flag_value([&] { return parse_strategy(strategy, "--strategy"); });
  const CostInputs inputs = flags.resolved();
  print_in_format(out, {recompute_table(residual, picked, inputs)}, format);
  return kExitOk;
}

int calibrate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  std::string table_path, format;
  po::options_description options("attnres calibrate options");
  options.add_options()("help,h", "show this help")(
      "table", po::value(&table_path),
      "a calibration table (TOML, docs/calibration.md) instead of the committed one")(
      "format", po::value(&format)->default_value("table"), "table | markdown | json | csv");
  auto values = parse_options(args, options);
  if (wants_help(values,
                 "usage: attnres calibrate [--table FILE.toml] [--format table|markdown|json|csv]\n"
                 "Modelled vs measured for every public measurement of AttnRes overhead in the "
                 "calibration table, with its source and the model's error (docs/calibration.md).",
                 options, out)) {
    return kExitOk;
  }
  po::notify(values);
  require_format(format, {"table", "markdown", "json", "csv"});
  const CalibrationTable table =
      table_path.empty() ? builtin_calibration() : load_calibration(table_path);
  const auto rows = evaluate_calibration(table);
  if (format == "json") {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& row : rows) {
      const auto& p = row.point;
      points.push_back({{"id", p.id},
                        {"title", p.title},
                        {"source", p.source},
                        {"url", p.url},
                        {"hardware", p.hardware_name},
                        {"quantity", to_string(p.quantity)},
                        {"measured", p.measured},
                        {"measured_text", p.measured_text},
                        {"modelled", row.modelled},
                        {"ratio", row.ratio},
                        {"bound", row.bound},
                        {"within_bound", row.within},
                        {"fitted", p.fitted},
                        {"regime", row.regime},
                        {"detail", row.detail},
                        {"assumptions", p.assumptions}});
    }
    const CalibrationError error = calibration_error(rows);
    out << nlohmann::json{{"table", table.source},
                          {"points", points},
                          {"error",
                           {{"points", error.points},
                            {"typical_factor", error.typical_factor},
                            {"worst_factor", error.worst_factor},
                            {"worst", error.worst_id}}},
                          {"summary", calibration_summary(rows)}}
               .dump(2)
        << "\n";
    return kExitOk;
  }
  print_in_format(out, {calibration_table(rows)}, format);
  return kExitOk;
}

}  // namespace attnres::cli

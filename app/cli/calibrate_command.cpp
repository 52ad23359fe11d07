// attnres calibrate: the cost model against every public measurement of AttnRes overhead in the
// calibration table, with its source and the model's error (docs/calibration.md); with
// --measure, against this machine and the engine's own depth reads (docs/calibration.md, "Our
// own engine").
#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "attnres/atomic_file.hpp"
#include "attnres/calibration.hpp"
#include "attnres/cost.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/depth_layout.hpp"
#include "attnres/engine.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/hardware.hpp"
#include "attnres/measure.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/report.hpp"
#include "attnres/strategy.hpp"
#include "attnres/strategy_report.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "progress.hpp"
#include "table_output.hpp"

namespace attnres::cli {

namespace {

// One (T, d, L, N) point of --measure: Block with N blocks and Full, at T tokens of width d.
struct MeasureShape {
  int tokens = 0, d = 0, sublayers = 0, blocks = 0;
};

// The default points: one bandwidth-bound above the last-level cache, one around it, one at the
// floor. --quick: one tiny point.
const std::vector<MeasureShape> kDefaultShapes = {
    {4096, 512, 16, 4}, {1024, 256, 16, 4}, {64, 64, 8, 2}};
const MeasureShape kQuickShape = {32, 32, 4, 2};
constexpr double kTolerance = 0.2;  // the goal: within 20 % on every point

MeasureShape parse_shape(const std::string& text) {
  std::vector<long long> numbers;
  std::stringstream in(text);
  std::string part;
  bool malformed = text.empty() || text.back() == ',';
  while (!malformed && std::getline(in, part, ',')) {
    malformed = part.empty() || part.size() > 9 ||
                !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!malformed) numbers.push_back(std::stoll(part));
  }
  if (malformed || numbers.size() != 4 ||
      std::any_of(numbers.begin(), numbers.end(), [](long long v) { return v < 1; })) {
    throw UsageError(
        "--shape takes T,d,L,N (four positive integers: tokens, width, sublayers, Block's "
        "blocks), got '" +
        text + "'");
  }
  // At most 9 digits each: they fit an int.
  MeasureShape shape{static_cast<int>(numbers[0]), static_cast<int>(numbers[1]),
                     static_cast<int>(numbers[2]), static_cast<int>(numbers[3])};
  if (shape.tokens > 65536 || shape.d > 16384 || shape.sublayers > 256) {
    throw UsageError("--shape " + text + ": at most T = 65536, d = 16384, L = 256");
  }
  if (shape.blocks > shape.sublayers || shape.sublayers % shape.blocks != 0) {
    throw UsageError("--shape " + text +
                     ": N must divide L (Block AttnRes with N blocks of L / N)");
  }
  // The largest buffers: Full's arena and the stack-style copy and keys, (L + 1) planes each.
  const double bytes =
      3.0 * (shape.sublayers + 1) * shape.tokens * static_cast<double>(shape.d) * 4;
  if (bytes > 8e9) {
    throw UsageError("--shape " + text + " needs about " + format_number(bytes / 1e9) +
                     " GB for Full's arena and the stack copy; at most 8 GB");
  }
  return shape;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", &tm);
  return text;
}

std::string gb_per_s(double bytes_per_s) {
  std::ostringstream out;
  out.precision(3);
  out << bytes_per_s / 1e9 << " GB/s";
  return out.str();
}

std::string gflop_per_s(double flops) {
  std::ostringstream out;
  out.precision(4);
  out << flops / 1e9 << " GFLOP/s";
  return out.str();
}

struct MachineFigures {
  int threads = 1;
  std::string date, isa;
  bool native_bf16 = false;
  std::vector<std::pair<int, Bandwidth>> triad;  // per thread count
  std::size_t triad_elements = 0;
  std::vector<GemmTiming> gemm;
  double call_floor = 0;
  double memory_bytes = 0;
};

double best_rate(const MachineFigures& m, Precision precision) {
  double best = 0;
  for (const auto& g : m.gemm)
    if (g.precision == precision) best = std::max(best, g.flops_per_s());
  return best;
}

double triad_at(const MachineFigures& m, int threads) {
  for (const auto& [t, bandwidth] : m.triad)
    if (t == threads) return bandwidth.bytes_per_s();
  return m.triad.back().second.bytes_per_s();
}

// The measured figures as a hardware preset (resources/hardware/*.toml) and what each one is.
std::pair<Hardware, std::vector<std::string>> measured_preset(const MachineFigures& m) {
  Hardware hw;
  hw.name = "this machine (measured)";
  const double bandwidth = triad_at(m, m.threads);
  hw.source = "attnres calibrate --measure, " + m.date + ", " + std::to_string(m.threads) +
              " threads: STREAM triad bandwidth, the engine's bf16 GEMM rate, the per-call floor "
              "of a tiny depth read; links not measured";
  hw.peak_flops = best_rate(m, Precision::bf16);
  hw.hbm_bandwidth = bandwidth;
  hw.intra_node_bandwidth = bandwidth;
  hw.scale_out_bandwidth = bandwidth;
  hw.link_latency = 0;
  hw.kernel_floor = m.call_floor;
  hw.gpus_per_node = 1;
  hw.memory_bytes = m.memory_bytes;
  hw.compute_efficiency = 1;
  hw.memory_efficiency = 1;
  hw.link_efficiency = 1;
  std::vector<std::string> lines = {
      "This machine, measured by attnres calibrate --measure on " + m.date + " with " +
          std::to_string(m.threads) + " threads (" + std::to_string(default_thread_count()) +
          " cores; oneDNN ISA " + m.isa + ").",
      "The figures are achieved rates, not datasheet peaks: every efficiency is 1.",
      "hbm_bandwidth: STREAM triad a = b + s c over three f32 arrays of " +
          std::to_string(m.triad_elements) + " elements, best of 5, at " +
          std::to_string(m.threads) + " threads (bytes = 12 per element).",
  };
  std::string per_threads = "  triad per thread count:";
  for (const auto& [t, b] : m.triad) {
    per_threads.append(" ")
        .append(std::to_string(t))
        .append(": ")
        .append(gb_per_s(b.bytes_per_s()));
    per_threads.append(t == m.triad.back().first ? "" : ",");
  }
  lines.push_back(per_threads);
  lines.push_back(
      "peak_bf16_flops: the best rate of the engine's bf16 products (engine::Matmul: oneDNN, "
      "bf16 inputs, f32 accumulation; " +
      std::string(m.native_bf16 ? "native bf16 units" : "emulated: no native bf16 units") +
      ") over the shapes below, rows split over the threads as the engine splits them.");
  for (const auto& g : m.gemm) {
    lines.push_back("  " + to_string(g.precision) + " " + std::to_string(g.m) + " x " +
                    std::to_string(g.n) + " x " + std::to_string(g.k) + ": " +
                    gflop_per_s(g.flops_per_s()) +
                    (g.precision == Precision::f64 ? " (Eigen)" : " (oneDNN)"));
  }
  lines.push_back(
      "kernel_floor: one thread-pool call of a depth read of 2 sources, 2 tokens per thread, "
      "d = 64 (bandwidth does not matter): the median of 1000 calls back to back.");
  lines.push_back(
      "intra_node_bandwidth, scale_out_bandwidth: not measured (one machine, no links): the triad "
      "bandwidth; link_latency: not measured, 0. memory_bytes: the physical memory.");
  return {hw, lines};
}

struct PointRow {
  MeasureShape shape;
  ResidualMode mode = ResidualMode::block;
  DepthImplementation implementation = DepthImplementation::one_shot;
  Strategy strategy = Strategy::fused_one_shot;
  std::int64_t engine_calls = 0, history_updates = 0;
  double measured = 0, standard_measured = 0;
  CallTime modelled, standard_modelled;
};

Strategy strategy_of(DepthImplementation implementation) {
  switch (implementation) {
    case DepthImplementation::one_shot:
      return Strategy::fused_one_shot;
    case DepthImplementation::two_phase:
      return Strategy::fused_two_phase;
    case DepthImplementation::stack:
      return Strategy::stack;
  }
  return Strategy::fused_one_shot;
}

double ratio_of(double modelled, double measured) {
  return measured > 0 ? modelled / measured : 0;
}

ReportTable machine_table(const MachineFigures& m) {
  ReportTable t = typed_table("machine", "This machine, measured (the preset's figures)",
                              {{"quantity", "quantity", Shown::text},
                               {"threads", "threads", Shown::integer},
                               {"shape", "shape", Shown::text},
                               {"value", "value", Shown::number},
                               {"unit", "unit", Shown::text}});
  for (const auto& [threads, b] : m.triad)
    add_row(t, {"stream_triad", threads, std::to_string(m.triad_elements) + " x 3 f32",
                b.bytes_per_s(), "bytes/s"});
  for (const auto& g : m.gemm) {
    add_row(t, {"gemm_" + to_string(g.precision), m.threads,
                std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k),
                g.flops_per_s(), "flop/s"});
  }
  add_row(t, {"call_floor", m.threads, "2 sources, 2 tokens per thread, d = 64", m.call_floor,
              "seconds"});
  t.note = "The preset --write-hardware writes holds the triad at " + std::to_string(m.threads) +
           " threads as its bandwidth, the best bf16 rate as its FLOP rate and the call floor, "
           "every efficiency 1 (achieved rates, not peaks).";
  return t;
}

ReportTable points_table(const std::vector<PointRow>& rows, const MachineFigures& m) {
  ReportTable t = typed_table(
      "measure", "Modelled vs measured: the engine's own depth reads on this machine",
      {{"point", "point", Shown::text},
       {"mode", "mode", Shown::text},
       {"tokens", "T", Shown::integer},
       {"d_model", "d", Shown::integer},
       {"sublayers", "L", Shown::integer},
       {"blocks", "N", Shown::integer},
       {"implementation", "implementation", Shown::text},
       {"strategy", "model strategy", Shown::text},
       {"engine_calls", "engine calls", Shown::integer},
       {"modelled_launches", "modelled launches", Shown::integer},
       {"floor_bound_fraction", "floor-bound (%)", Shown::percent},
       {"measured_seconds", "measured (us)", Shown::microseconds},
       {"modelled_seconds", "modelled (us)", Shown::microseconds},
       {"modelled_over_measured", "modelled / measured", Shown::decimals3},
       {"measured_overhead_seconds", "measured overhead (us)", Shown::microseconds},
       {"modelled_overhead_seconds", "modelled overhead (us)", Shown::microseconds},
       {"overhead_modelled_over_measured", "overhead modelled / measured", Shown::decimals3},
       {"within_tolerance", "within 20 %", Shown::yes_no}});
  int within = 0;
  double worst = 1;
  for (const auto& row : rows) {
    const double ratio = ratio_of(row.modelled.seconds, row.measured);
    const double overhead_measured = row.measured - row.standard_measured;
    const double overhead_modelled = row.modelled.seconds - row.standard_modelled.seconds;
    const bool ok = std::abs(ratio - 1) <= kTolerance;
    within += ok ? 1 : 0;
    if (ratio > 0) worst = std::max({worst, ratio, 1 / ratio});
    const MeasureShape& s = row.shape;
    const std::string point =
        to_string(row.mode) + "-T" + std::to_string(s.tokens) + "-d" + std::to_string(s.d) + "-L" +
        std::to_string(s.sublayers) +
        (row.mode == ResidualMode::block ? "-N" + std::to_string(s.blocks) : std::string());
    add_row(t, {point, to_string(row.mode), s.tokens, s.d, s.sublayers,
                row.mode == ResidualMode::block ? nlohmann::json(s.blocks)
                                                : nlohmann::json(s.sublayers),
                to_string(row.implementation), to_string(row.strategy), row.engine_calls,
                row.modelled.launches,
                row.modelled.launches > 0 ? static_cast<double>(row.modelled.floor_bound) /
                                                static_cast<double>(row.modelled.launches)
                                          : 0.0,
                row.measured, row.modelled.seconds, ratio, overhead_measured, overhead_modelled,
                overhead_measured > 0 ? nlohmann::json(overhead_modelled / overhead_measured)
                                      : nlohmann::json(nullptr),
                ok});
  }
  t.note = std::to_string(within) + " of " + std::to_string(rows.size()) +
           " points within 20 %; worst factor " + format_number(std::round(worst * 100) / 100) +
           ". Measured: one forward's depth reads (f32, threads: " + std::to_string(m.threads) +
           ", best of the repeats; Block's partial-sum adds included), overhead = that "
           "minus the standard residual's L adds as the engine runs them (single-threaded). "
           "Modelled: the strategy's forward calls (docs/math.md §3.6) at the measured preset, "
           "max(floor, bytes / bandwidth) per call. Why points differ: docs/calibration.md, "
           "\"Our own engine\".";
  return t;
}

struct MeasureFlags {
  bool quick = false;
  std::vector<std::string> shapes;
  int threads = 0;
  std::string write_hardware;
};

int calibrate_measure(const MeasureFlags& flags, const TableFormat& format, std::ostream& out,
                      std::ostream& err) {
  std::vector<MeasureShape> shapes;
  for (const auto& text : flags.shapes) shapes.push_back(parse_shape(text));
  if (flags.quick && !shapes.empty())
    throw UsageError("--quick measures one tiny point; --shape chooses the points: give one");
  if (shapes.empty())
    shapes = flags.quick ? std::vector<MeasureShape>{kQuickShape} : kDefaultShapes;
  parse_flag_value([&] { check_thread_count(flags.threads, "--threads"); });
  if (!flags.write_hardware.empty()) {
    // Before the work, not after.
    parse_flag_value([&] { check_output_file(flags.write_hardware, "--write-hardware"); });
  }
  MachineFigures m;
  m.threads = flags.threads > 0 ? flags.threads : default_thread_count();
  m.date = utc_now();
  const MatrixUnits units = matrix_units();
  m.isa = units.isa;
  m.native_bf16 = units.native_bf16;
  m.memory_bytes = physical_memory_bytes();
  // At least `repeat` timed runs of each pass, and more up to min_seconds of them: the best of
  // many runs of a small pass is less at the mercy of other processes.
  const int repeat = flags.quick ? 1 : 3;
  const double min_seconds = flags.quick ? 0.0 : 0.25;
  m.triad_elements = flags.quick ? std::size_t(1) << 20 : std::size_t(1) << 26;
  struct GemmShape {
    int m, n, k;
  };
  // 1024^3, and the engine's (T, 3d) x d projections at d = 256 and 512 (T = 1024).
  const std::vector<GemmShape> gemm_shapes =
      flags.quick ? std::vector<GemmShape>{{64, 64, 64}}
                  : std::vector<GemmShape>{{1024, 1024, 1024}, {1024, 768, 256}, {1024, 1536, 512}};
  const std::vector<Precision> precisions = {Precision::f32, Precision::bf16, Precision::f64};
  const std::vector<DepthImplementation> implementations = {
      DepthImplementation::one_shot, DepthImplementation::two_phase, DepthImplementation::stack};
  const std::vector<ResidualMode> modes = {ResidualMode::block, ResidualMode::full};

  const std::size_t total = static_cast<std::size_t>(m.threads) +
                            gemm_shapes.size() * precisions.size() + 1 +
                            shapes.size() * modes.size() * (implementations.size() + 1);
  std::size_t step = 0;
  ProgressBar bar("calibrate --measure");
  const Progress progress = [&](std::size_t, std::size_t) { return bar.update(step, total); };

  for (int threads = 1; threads <= m.threads; ++threads, ++step) {
    report_progress(progress, 0, 1, "measuring");
    m.triad.emplace_back(threads,
                         measure_stream_triad(threads, m.triad_elements, flags.quick ? 2 : 5));
  }
  for (const auto& shape : gemm_shapes) {
    for (const Precision precision : precisions) {
      m.gemm.push_back(measure_gemm(precision, shape.m, shape.n, shape.k, m.threads,
                                    flags.quick ? 1 : 3, progress));
      ++step;
    }
  }
  m.call_floor = measure_call_floor(m.threads, flags.quick ? 50 : 1000, progress);
  ++step;
  const auto [hardware, comments] = measured_preset(m);

  std::vector<PointRow> rows;
  for (const MeasureShape& shape : shapes) {
    for (const ResidualMode mode : modes) {
      const std::int64_t L = shape.sublayers;
      const BlockLayout layout =
          uniform_block_layout(L, mode == ResidualMode::full ? 1 : L / shape.blocks);
      // The two-phase groups: Block's blocks; Full's schedule block as the cost model picks it,
      // which the engine's pass then uses too.
      const int schedule = mode == ResidualMode::full
                               ? static_cast<int>(best_full_schedule_block(L, shape.d).block_size)
                               : 0;
      const BlockLayout groups =
          mode == ResidualMode::full ? uniform_block_layout(L, schedule) : layout;
      const DepthLayout depth = make_depth_layout(
          mode, shape.sublayers, mode == ResidualMode::full ? 1 : shape.sublayers / shape.blocks);
      DepthPass pass(depth, shape.tokens, shape.d, m.threads, schedule);
      const double standard =
          time_standard_residual(shape.tokens, shape.d, shape.sublayers, repeat, progress);
      ++step;
      const CallTime standard_modelled =
          calls_time(standard_residual_calls(L), shape.d, shape.tokens, 4, hardware);
      for (const DepthImplementation implementation : implementations) {
        PointRow row;
        row.shape = shape;
        row.mode = mode;
        row.implementation = implementation;
        row.strategy = strategy_of(implementation);
        row.measured = time_depth_pass(pass, implementation, repeat, progress, min_seconds);
        row.engine_calls = pass.calls() + pass.history_updates();
        row.history_updates = pass.history_updates();
        row.standard_measured = standard;
        // The model of the calls as the engine makes them (strategy.hpp, cpu_engine_read_ops).
        const StrategyCost cost =
            strategy_cost(row.strategy, layout, groups, cpu_engine_read_ops());
        row.modelled = calls_time(cost.forward_calls, shape.d, shape.tokens, 4, hardware);
        row.standard_modelled = standard_modelled;
        rows.push_back(row);
        ++step;
      }
    }
  }
  throw_if_interrupted("measuring");

  if (!flags.write_hardware.empty()) {
    write_file_atomically(flags.write_hardware, hardware_to_toml(hardware, comments));
    err << "wrote " << flags.write_hardware << " (use it as --hardware " << flags.write_hardware
        << ")\n";
  }

  const ReportTable machine = machine_table(m);
  const ReportTable points = points_table(rows, m);
  if (format.format == "json") {
    nlohmann::json triad = nlohmann::json::array(), gemm = nlohmann::json::array();
    for (const auto& [threads, b] : m.triad)
      triad.push_back({{"threads", threads}, {"bytes_per_second", b.bytes_per_s()}});
    for (const auto& g : m.gemm) {
      gemm.push_back({{"precision", to_string(g.precision)},
                      {"m", g.m},
                      {"n", g.n},
                      {"k", g.k},
                      {"flop_per_second", g.flops_per_s()}});
    }
    int within = 0;
    for (const auto& row : rows)
      within += std::abs(ratio_of(row.modelled.seconds, row.measured) - 1) <= kTolerance ? 1 : 0;
    nlohmann::json root = {
        {"schema", schema_tag("calibrate_measure")},
        {"date", m.date},
        {"threads", m.threads},
        {"isa", m.isa},
        {"native_bf16", m.native_bf16},
        {"machine",
         {{"stream_triad", triad},
          {"triad_elements", m.triad_elements},
          {"gemm", gemm},
          {"call_floor_seconds", m.call_floor},
          {"memory_bytes", m.memory_bytes}}},
        {"hardware", hardware_to_json(hardware)},
        {"written_hardware", flags.write_hardware.empty() ? nlohmann::json(nullptr)
                                                          : nlohmann::json(flags.write_hardware)},
        {"points", table_json(points)["rows"]},
        {"summary",
         {{"points", rows.size()},
          {"within_tolerance", within},
          {"tolerance_fraction", kTolerance}}},
        {"note", points.note}};
    out << root.dump(2) << "\n";
    return kExitOk;
  }
  if (format.format == "csv") {
    print_in_format(out, {points}, format, {"calibrate_measure", {}});
  } else {
    print_in_format(out, {machine, points}, format, {"calibrate_measure", {}});
  }
  return kExitOk;
}

}  // namespace

int calibrate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string table_path;
  TableFormat format;
  MeasureFlags measure;
  po::options_description options = command_options("calibrate");
  options.add_options()(
      "table", po::value(&table_path),
      "a calibration table (TOML, docs/calibration.md) instead of the committed one")(
      "measure",
      "measure this machine (stream bandwidth, GEMM rates, the per-call floor) and time the "
      "engine's own depth reads (one-shot, two-phase, stack-style) against the model")(
      "quick", "with --measure: one tiny point and short measurements (seconds)")(
      "shape", po::value(&measure.shapes)->composing(),
      "with --measure: a point T,d,L,N (tokens, width, sublayers, Block's blocks); repeatable; "
      "default 4096,512,16,4 1024,256,16,4 64,64,8,2")(
      "threads", po::value(&measure.threads)->default_value(0),
      threads_help("with --measure: CPU threads").c_str())(
      "write-hardware", po::value(&measure.write_hardware),
      "with --measure: write the measured figures as a hardware preset FILE.toml (use it as "
      "--hardware FILE.toml)");
  add_table_format_option(options, format, false);
  po::variables_map values;
  if (parse_or_help(
          args, options, values, out,
          "usage: attnres calibrate [--table FILE.toml] [--format table|markdown|json|csv]\n"
          "       attnres calibrate --measure [--quick | --shape T,d,L,N ...] [--threads N]\n"
          "                         [--write-hardware FILE.toml] [--format ...]\n"
          "Modelled vs measured for every public measurement of AttnRes overhead in the "
          "calibration table, with its source and the model's error (docs/calibration.md). With "
          "--measure: this machine's bandwidth, GEMM rates and call floor, and the engine's own "
          "depth reads of Block and Full timed against what the cost model predicts for them "
          "(docs/calibration.md, \"Our own engine\"; takes about half a minute, --quick a "
          "second).")) {
    return kExitOk;
  }
  require_table_format(format);
  measure.quick = values.count("quick") > 0;
  if (values.count("measure")) {
    if (values.count("table")) {
      throw UsageError(
          "--table compares the public measurements; --measure measures this machine: give one");
    }
    return calibrate_measure(measure, format, out, err);
  }
  for (const char* flag : {"quick", "shape", "write-hardware"}) {
    if (values.count(flag))
      throw UsageError("--" + std::string(flag) + " applies to --measure; give --measure");
  }
  if (!values["threads"].defaulted())
    throw UsageError("--threads applies to --measure; give --measure");
  const CalibrationTable table =
      table_path.empty() ? builtin_calibration() : load_calibration(table_path);
  const auto rows = evaluate_calibration(table);
  if (format.format == "json") {
    nlohmann::json root = calibration_to_json(table.source, rows);
    root["schema"] = schema_tag("calibrate");
    out << root.dump(2) << "\n";
    return kExitOk;
  }
  print_in_format(out, {calibration_table(rows)}, format, {"calibrate", {}});
  return kExitOk;
}

}  // namespace attnres::cli

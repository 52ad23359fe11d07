// The time and pipeline sections of a report (docs/math.md §3.4): the roofline time overhead of
// every scheme in prefill and decode, and the pipeline schedule simulation — its summary table, the
// Gantt chart of ops and transfers per rank, and live memory per rank.
#include <cmath>

#include "attnres/report.hpp"
#include "report_parts.hpp"

namespace attnres {

using detail::num;

ReportTable time_table(const CostInputs& in, const StackTime& prefill, const StackTime& decode,
                       const Hardware& hw) {
  ReportTable t = typed_table(
      "time", "Residual-mechanism time overhead (roofline model)",
      {{"scheme", "scheme", Shown::text},
       {"prefill_stack_seconds", "prefill stack (s)", Shown::number},
       {"prefill_overhead_fraction", "prefill overhead (%)", Shown::percent},
       {"decode_stack_seconds", "decode stack (s)", Shown::number},
       {"decode_overhead_fraction", "decode overhead (%)", Shown::percent},
       {"decode_residual_op_seconds", "residual op per sublayer, decode (s)", Shown::number}});
  for (const auto& [scheme, name] : kResidualSchemeNames) {
    const auto i = static_cast<std::size_t>(scheme);
    add_row(t, {std::string(name), prefill.stack_seconds[i], prefill.overhead_fraction[i],
                decode.stack_seconds[i], decode.overhead_fraction[i], decode.residual[i].seconds});
  }
  t.note =
      "Forward time of all L = " + num(in.sublayers) + " sublayers on " + hw.name + " (" +
      format_number(hw.peak_flops / 1e12) + " TFLOP/s x " + format_number(hw.compute_efficiency) +
      ", " + format_number(hw.hbm_bandwidth / 1e12) + " TB/s x " +
      format_number(hw.memory_efficiency) + "); prefill: B = " + num(in.batch) +
      " x T = " + num(in.tokens) + " tokens; decode: one token for each of B = " + num(in.batch) +
      " sequences at context T. Overhead = stack time / standard - 1: forward only, one device, "
      "the mechanism as one memory-bound op; the training step's overhead is attnres pipeline's "
      "(docs/math.md §3.8). Source: " +
      hw.source + ".";
  return t;
}

ChartSpec pipeline_gantt_chart(const PipelineReport& p) {
  ChartSpec chart;
  chart.kind = ChartSpec::Kind::gantt;
  chart.id = "pipeline_gantt";
  const auto& s = p.settings;
  chart.title = to_string(s.schedule) + " schedule, P = " + num(s.model.pp) +
                ", V = " + num(s.model.vpp) +
                ", m = " + num(static_cast<std::int64_t>(s.microbatches)) + " (AttnRes, " +
                to_string(s.cache) + ")";
  chart.x_label = "time (ms)";
  for (std::int64_t r = 0; r < s.model.pp; ++r) chart.lanes.push_back("rank " + num(r));
  for (const auto& op : p.attnres.ops) {
    ChartBox box;
    box.x0 = op.start * 1e3;
    box.x1 = op.end * 1e3;
    box.lane = op.rank;
    box.category = op.backward ? GanttCategory::backward : GanttCategory::forward;
    box.label = std::string(op.backward ? "B" : "F") + " mb " + std::to_string(op.microbatch) +
                ", chunk " + std::to_string(op.chunk);
    box.tag = std::to_string(op.microbatch);
    chart.boxes.push_back(std::move(box));
  }
  for (const auto& transfer : p.attnres.transfers) {
    if (transfer.end > transfer.start) {
      ChartBox box;
      box.x0 = transfer.start * 1e3;
      box.x1 = transfer.end * 1e3;
      box.lane = transfer.from_rank;
      box.category = transfer.backward ? GanttCategory::send_backward : GanttCategory::send_forward;
      box.label = std::string(transfer.backward ? "send B" : "send F") + " mb " +
                  std::to_string(transfer.microbatch) + ", chunk " +
                  std::to_string(transfer.from_chunk) + " -> " + std::to_string(transfer.to_chunk) +
                  " (rank " + std::to_string(transfer.to_rank) + ")";
      chart.boxes.push_back(std::move(box));
    }
  }
  chart.caption = "Iteration " + num(p.iteration_time_s * 1e3) + " ms; standard residual " +
                  num(p.standard.iteration_seconds * 1e3) +
                  " ms; thin bars are transfers on the sender's lane.";
  return chart;
}

ChartSpec pipeline_memory_chart(const PipelineReport& p) {
  ChartSpec chart =
      detail::xy_chart("pipeline_memory", "Live memory per rank (activations + AttnRes history)",
                       "time (ms)", "GB (1e9 bytes)");
  const std::size_t P = p.attnres.memory.size();
  std::vector<std::size_t> ranks;
  for (std::size_t r = 0; r < P; ++r) {
    if (P <= 8 || r == 0 || r == P - 1 || r % (P / 6) == 0) ranks.push_back(r);
  }
  for (std::size_t r : ranks) {
    ChartSeries series{
        "rank " + num(static_cast<std::int64_t>(r)), {}, ChartSeries::Style::line, false};
    double previous = 0;
    for (const auto& point : p.attnres.memory[r]) {
      series.points.emplace_back(point.time * 1e3, previous / 1e9);  // steps
      series.points.emplace_back(point.time * 1e3, point.bytes / 1e9);
      previous = point.bytes;
    }
    chart.series.push_back(std::move(series));
  }
  chart.caption = "Peak per rank " + num(p.peak_memory_bytes_per_rank / 1e9) + " GB (" +
                  num(p.peak_memory_bytes_per_rank / 1073741824.0) + " GiB).";
  return chart;
}

void add_pipeline_section(const PipelineReport& p, Report& report) {
  const auto& s = p.settings;
  // One quantity per row: its key (as in pipeline --format json's "result"), what it is, and the
  // value in SI units (shown in the unit the quantity names).
  ReportTable t =
      typed_table("pipeline_sim", "Pipeline schedule simulation: does the AttnRes traffic hide?",
                  {{"key", "key", Shown::text},
                   {"quantity", "quantity", Shown::text},
                   {"value", "value", Shown::number}},
                  "pipeline_gantt");
  auto row = [&](const char* key, const std::string& name, double value, Shown shown) {
    add_row(t, {key, name, value}, {"", "", shown_value(value, shown)});
  };
  row("step_seconds", "step time (s): the pipeline iteration + exposed gradient collectives",
      p.step_time_s, Shown::number);
  row("standard_step_seconds", "step time, standard residual (s)",
      p.standard.iteration_seconds + p.step_standard.dp, Shown::number);
  row("iteration_seconds", "pipeline iteration, AttnRes (s)", p.iteration_time_s, Shown::number);
  row("standard_iteration_seconds", "iteration time, standard residual (s)",
      p.standard.iteration_seconds, Shown::number);
  row("attnres_overhead_fraction", "AttnRes overhead (%)", p.attnres_overhead_fraction,
      Shown::percent);
  row("bubble_fraction", "bubble (% of the busiest rank's compute)", p.bubble_fraction,
      Shown::percent);
  row("closed_form_bubble_fraction", "closed-form bubble (%)", p.closed_form_bubble,
      Shown::percent);
  row("exposed_communication_seconds", "exposed communication (s)", p.exposed_comm_s,
      Shown::number);
  row("peak_memory_bytes_per_rank",
      "peak memory per rank (GB): the largest total of the memory table below",
      p.peak_memory_bytes_per_rank, Shown::gigabytes);
  row("transferred_bytes", "bytes transferred per iteration (both directions)",
      p.attnres.transferred_bytes, Shown::number);
  row("link_bandwidth_bytes_per_second", "link bandwidth (GB/s per direction, before efficiency)",
      p.link_bandwidth, Shown::gigabytes);
  t.note = to_string(s.schedule) + " schedule, P = " + num(s.model.pp) +
           ", V = " + num(s.model.vpp) + ", m = " + num(static_cast<std::int64_t>(s.microbatches)) +
           " micro-batches of B = " + num(s.model.batch) + " x T = " + num(s.model.tokens) +
           " tokens; " + to_string(s.mode) + " AttnRes, " + to_string(s.cache) +
           " history; transfers " +
           (s.ideal_links ? "free"
            : s.overlap   ? "overlapped with compute"
                          : "blocking the sender") +
           ". Backward = 2 x forward. The bubble's denominator is the busiest rank's compute time.";
  report.tables.push_back(t);
  report.charts.push_back(pipeline_gantt_chart(p));
  ReportTable memory =
      typed_table("pipeline_memory", "Peak live memory per rank",
                  {{"rank", "rank", Shown::integer},
                   {"peak_bytes", "peak (GB)", Shown::gigabytes},
                   {"peak_activation_bytes", "activations only (GB)", Shown::gigabytes}},
                  "pipeline_memory");
  for (std::size_t r = 0; r < p.attnres.peak_memory_bytes.size(); ++r) {
    add_row(memory, {static_cast<std::int64_t>(r), p.attnres.peak_memory_bytes[r],
                     p.attnres.peak_activation_bytes[r]});
  }
  memory.note =
      "Activations of every sublayer (docs/math.md §3.7: Korthikanti et al. 2022 term by term, "
      "recompute " +
      enum_name(kRecomputePolicyNames, s.model.recompute) +
      ") plus the received AttnRes history, held from a chunk's forward to its backward.";
  report.tables.push_back(memory);
  report.charts.push_back(pipeline_memory_chart(p));
  MemorySettings settings;
  settings.microbatches = s.microbatches;
  settings.schedule = s.schedule;
  settings.mode = s.mode;
  settings.strategy = s.strategy;
  report.tables.push_back(memory_table(p.memory, memory_assumptions(s.model, settings),
                                       " (activations and history at the simulated peak)"));
  report.tables.push_back(
      communication_table(step_communication(s.model, s.hardware, s.microbatches, s.mode)));
}

}  // namespace attnres

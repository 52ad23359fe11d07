// The validation suite as tables (docs/validation.md): every published run predicted against its
// measurement, the typical and worst error by regime, and the runs the engine cannot express.
#include <cmath>

#include "attnres/report.hpp"
#include "attnres/validation.hpp"
#include "report_parts.hpp"

namespace attnres {

using detail::num;

namespace {

// "t8 c1 P8 V3 D12 e1 z1, selective": the layout in one cell.
std::string layout(const CostInputs& in) {
  // Appended piece by piece: GCC 12 at -O3 reports a false -Wstringop-overflow on "t" + ... chains.
  std::string out;
  auto part = [&out](const char* name, std::int64_t value) {
    if (!out.empty()) out += ' ';
    out += name;
    out += num(value);
  };
  part("t", in.tp);
  part("c", in.cp);
  part("P", in.pp);
  part("V", in.vpp);
  part("D", in.dp);
  if (in.ep > 1) part("e", in.ep);
  if (in.zero > 0) part("z", in.zero);
  out += ", ";
  out += enum_name(kRecomputePolicyNames, in.recompute);
  return out;
}

nlohmann::json optional_number(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

void add_validation_section(const std::vector<ValidationResult>& results, Report& report) {
  ReportTable runs = typed_table(
      "validation_runs", "Published training runs: predicted vs measured (standard residual)",
      {{"id", "run", Shown::text},
       {"hardware", "hardware", Shown::text},
       {"framework", "framework", Shown::text},
       {"gpus", "GPUs", Shown::integer},
       {"layout", "layout", Shown::text},
       {"measured_step_seconds", "measured step (s)", Shown::number},
       {"predicted_step_seconds", "predicted step (s)", Shown::number},
       {"step_ratio", "step ratio", Shown::decimals3},
       {"measured_memory_bytes", "measured memory (GiB)", Shown::gibibytes},
       {"predicted_memory_bytes", "predicted memory (GiB)", Shown::gibibytes},
       {"memory_ratio", "memory ratio", Shown::decimals3},
       {"fits", "fits", Shown::yes_no}});
  ReportTable refused = typed_table("validation_not_expressible",
                                    "Runs the engine cannot express (listed, not predicted)",
                                    {{"id", "run", Shown::text}, {"why", "why", Shown::text}});
  int doesnt_fit = 0;
  for (const ValidationResult& r : results) {
    const ValidationRun& run = *r.run;
    if (!r.evaluated) {
      std::string why = run.not_expressible;
      if (run.expressible) {
        why = "the engine refused the setting: ";
        why += r.refused;
      }
      add_row(refused, {run.id, why});
      continue;
    }
    if (!r.fits) ++doesnt_fit;
    std::string hardware = run.hardware_name;
    if (run.fp8) hardware += " fp8";
    add_row(runs, {run.id, hardware, run.framework, run.gpus, layout(run.settings.model),
                   run.step_seconds, r.predicted_step_seconds, r.step_ratio,
                   optional_number(run.memory_bytes), optional_number(r.predicted_memory_bytes),
                   optional_number(r.memory_ratio), r.fits});
  }
  runs.note =
      "Each run as published (resources/validation/training-runs.toml: source, configuration and "
      "what was measured), predicted by the simulated step of `attnres pipeline --mode standard` "
      "and the memory of `attnres memory` with the presets and defaults, no per-run knob. Memory "
      "compares like with like: max_allocated with the tensors, max_reserved with the tensors and "
      "the allocator's fragmentation, nvidia-smi with the whole total. fp8 runs are timed at the "
      "bf16 rate (the time model has no FP8 GEMMs). " +
      num(static_cast<std::int64_t>(doesnt_fit)) +
      " run(s) that ran get a 'does not fit' verdict. (docs/validation.md)";
  ReportTable summary =
      typed_table("validation_summary",
                  "Error by regime: typical (geometric mean of the error factors) and worst",
                  {{"quantity", "quantity", Shown::text},
                   {"regime", "regime", Shown::text},
                   {"runs", "runs", Shown::integer},
                   {"typical_factor", "typical (x)", Shown::decimals3},
                   {"within_20_percent", "within ±20 %", Shown::integer},
                   {"within_30_percent", "within ±30 %", Shown::integer},
                   {"worst_factor", "worst (x)", Shown::decimals3},
                   {"worst_run", "worst run", Shown::text}});
  for (const ValidationSummary& s : validation_summaries(results)) {
    add_row(summary, {s.quantity, s.regime, static_cast<std::int64_t>(s.runs), s.typical,
                      static_cast<std::int64_t>(s.within_20_percent),
                      static_cast<std::int64_t>(s.within_30_percent), s.worst, s.worst_id});
  }
  summary.note =
      "An error factor is max(r, 1/r) of the ratio r = predicted / measured (x1.00 is exact). "
      "Goals (issue 44): step typical <= x1.10, 85 % within ±20 %, none beyond x1.5; memory "
      "typical <= x1.15, all within ±30 %.";
  report.tables.push_back(std::move(summary));
  report.tables.push_back(std::move(runs));
  report.tables.push_back(std::move(refused));
}

}  // namespace attnres

// The validation suite (docs/validation.md): published, measured training runs
// (resources/validation/training-runs.toml, compiled in) against the step time and the memory per
// rank this engine predicts for the same setting, with the standard residual (the runs have no
// AttnRes). Each run's prediction is the simulated step of `attnres pipeline --mode standard` and
// the memory of `attnres memory` — the same functions, no per-run knob. A run the engine cannot
// express is listed with why.
//
//   const ValidationSuite suite = builtin_validation_suite();
//   const std::vector<ValidationResult> results = validate(suite);
//   const auto summary = validation_summaries(results);  // typical and worst error by regime
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnres/pipeline.hpp"

namespace attnres {

struct ValidationRun {
  std::string id, title, source, url, framework, hardware_name, measured_text, derivation,
      assumptions, location;
  std::int64_t gpus = 0;
  double step_seconds = 0;               // measured (or derived from published throughput)
  std::optional<double> memory_bytes;    // measured per-GPU peak, bytes (GiB x 2^30)
  std::string memory_kind, memory_text;  // max_allocated | max_reserved | nvidia_smi | other
  bool expressible = true;
  std::string not_expressible;  // why, when not expressible
  bool fp8 = false;             // FP8 GEMMs (modelled at the bf16 rate: see notes)
  std::int64_t global_batch = 0;
  PipelineSettings settings;  // mode standard, resolved model, hardware loaded
};

struct ValidationSuite {
  std::string source;
  std::vector<ValidationRun> runs;
};
// Parses a suite file; errors name source:line:column and what was expected.
ValidationSuite parse_validation_suite(const std::string& text, const std::string& source);
const std::string& builtin_validation_text();
ValidationSuite builtin_validation_suite();

struct ValidationResult {
  const ValidationRun* run = nullptr;
  bool evaluated = false;  // false: not expressible, or the engine refused the setting
  std::string refused;     // the engine's message when it refused
  double predicted_step_seconds = 0;
  double step_ratio = 0;  // predicted / measured
  // The predicted quantity of the measured kind: max_allocated the tensors, max_reserved the
  // tensors with the allocator's fragmentation, nvidia_smi and other kinds the whole total.
  std::optional<double> predicted_memory_bytes, memory_ratio;
  bool fits = true;  // the fit verdict of the peak rank
  std::string fit;
};
std::vector<ValidationResult> validate(const ValidationSuite& suite);

// An error factor: max(r, 1/r) of a ratio r (x1.00 is exact).
double error_factor(double ratio);
struct ValidationSummary {
  std::string regime;    // "all", "dense", "moe", "a100", "torchtitan", ...
  std::string quantity;  // "step" or "memory"
  int runs = 0;
  double typical = 0;  // geometric mean of the error factors
  double worst = 0;    // the largest error factor
  std::string worst_id;
  int within_20_percent = 0;  // runs with |ratio - 1| <= 0.2
  int within_30_percent = 0;
};
// Step and memory summaries over all evaluated runs and by regime: dense / MoE, hardware,
// framework, precision (bf16 / fp8).
std::vector<ValidationSummary> validation_summaries(const std::vector<ValidationResult>& results);

}  // namespace attnres

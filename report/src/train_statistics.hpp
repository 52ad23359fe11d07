// Internal to the report layer: the training section's statistics (docs/training.md#statistics,
// docs/quality.md) — the paired-differences table, chart and conclusion, and the measured share of
// Full AttnRes's gain beside the published band. train_report.cpp lays out the section.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnres/report.hpp"
#include "attnres/train_report.hpp"

namespace attnres::detail {

// How the intervals are computed, in words (report.json training.statistics_method).
inline constexpr const char* kStatisticsMethod =
    "paired differences of final validation losses by seed; 95 % interval mean -/+ t_{0.975, "
    "n-1} s / sqrt(n) (Student t); resolved when the interval excludes 0; seeds to resolve: the "
    "smallest n with n >= ((t_{0.975, n-1} + t_{0.80, n-1}) s / |gap|)^2 (80 % power)";

// The train_paired_differences table and chart and the "What the training measurement
// resolves" conclusion; returns the rows' JSON. `setup_text` states the runs' setting.
nlohmann::json add_paired_section(const std::string& setup_text,
                                  const std::vector<PairedComparison>& comparisons,
                                  const std::vector<SchemeLosses>& schemes, Report& report);

// f(N) = (standard - Block N) / (standard - Full) of the means over seeds: the train_quality_band
// table and chart on the published band at the tiny model's depth L, and the same points on the
// scenario's own quality_band chart when it has one. Nothing without standard, Full and Block.
void add_measured_fraction(int L, const std::string& setup_text,
                           const std::vector<SchemeLosses>& schemes, Report& report);

}  // namespace attnres::detail

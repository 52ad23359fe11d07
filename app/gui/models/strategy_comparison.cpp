// The Strategies tab's comparison (strategy_comparison.hpp).
#include "strategy_comparison.hpp"

#include <algorithm>

#include "attnres/block_layout.hpp"
#include "attnres/format.hpp"
#include "attnres/strategy_report.hpp"

namespace attnres::gui {

StrategyComparison compare_strategies(const CostInputs& in, const Hardware& hardware) {
  StrategyComparison c;
  c.sublayers = in.sublayers;
  c.d_model = in.d_model;
  c.bytes_per_element = bytes_per_element(in.dtype);
  c.vector_bytes = static_cast<double>(in.d_model) * static_cast<double>(in.batch) *
                   static_cast<double>(in.tokens) * c.bytes_per_element;
  c.block_layout = block_layout_of(in).describe();
  c.standard = standard_residual_counts(in.sublayers);
  c.hardware = hardware;
  for (const ResidualMode mode : {ResidualMode::block, ResidualMode::full}) {
    const BlockLayout layout = mode_layout(mode, in), groups = mode_groups(mode, in);
    std::int64_t max_sources = 0;
    for (const ReadSources& read : read_sources(layout))
      max_sources = std::max(max_sources, read.sources());
    for (const auto& entry : kStrategyNames) {
      StrategyComparison::Row row;
      row.mode = mode;
      row.strategy = entry.value;
      const StrategyCost cost = strategy_cost(entry.value, layout, groups);
      row.forward = cost.forward;
      row.backward = cost.backward;
      row.copy_vectors = cost.copy_vectors;
      row.saved_vectors = cost.saved_vectors;
      row.inherent_read_vectors = cost.inherent_read_vectors;
      row.max_sources = max_sources;
      row.train = strategy_step(entry.value, mode, in, Phase::prefill, true, hardware);
      row.decode = strategy_step(entry.value, mode, in, Phase::decode, false, hardware);
      c.rows.push_back(std::move(row));
    }
  }
  return c;
}

}  // namespace attnres::gui

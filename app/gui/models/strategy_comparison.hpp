// The cost explorer's Strategies tab, computed with no widget (docs/math.md §3.6): the four
// implementation strategies of the depth read under Block AttnRes (the inputs' layout) and Full
// AttnRes — bytes read and written, launches, memory saved for the backward pass, and the time of a
// training step and of one decode call on a hardware preset — from the core's strategy model
// (strategy.hpp, time_model.hpp). The cost view draws it; tests/gui_models/ checks it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnres/cost.hpp"
#include "attnres/hardware.hpp"
#include "attnres/strategy.hpp"
#include "attnres/time_model.hpp"

namespace attnres::gui {

// Every strategy under Block AttnRes (the inputs' layout) and Full AttnRes, with the time of a
// training step (prefill, forward + backward) and of one decode call on `hardware`.
struct StrategyComparison {
  struct Row {
    ResidualMode mode = ResidualMode::block;
    Strategy strategy = Strategy::fused_one_shot;
    PassCounts forward, backward;
    std::int64_t copy_vectors = 0, saved_vectors = 0, inherent_read_vectors = 0;
    std::int64_t max_sources = 0;  // the largest read (sources)
    StrategyStep train, decode;
  };
  std::vector<Row> rows;       // Block's four, then Full's four, in kStrategyNames order
  double vector_bytes = 0;     // one d-wide vector over a micro-batch: d · B·T · b
  std::string block_layout;    // "16 x 8" or "2, 6, 4"
  std::int64_t sublayers = 0;  // L
  PassCounts standard;         // the standard residual's adds (forward; backward the same)
  Hardware hardware;
  std::int64_t d_model = 0;
  int bytes_per_element = 2;
};
StrategyComparison compare_strategies(const CostInputs& resolved, const Hardware& hardware);

}  // namespace attnres::gui

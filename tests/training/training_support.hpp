// Helpers shared by the training suites (docs/training.md): the residual modes every gradient test
// covers, and text with structure a tiny model learns in a few steps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnres/forward.hpp"

namespace attnres::test {

struct ModeCase {
  std::string name;
  ResidualMode mode;
  int block_size;
  bool zero_placeholder;
};

// Standard, Full, Block S = 1, 2, 3 (an incomplete last block at L = 4), S = 2 with the zero
// placeholder, and S = 4 (one block).
inline std::vector<ModeCase> gradient_modes() {
  return {{"standard", ResidualMode::standard, 0, false},
          {"full", ResidualMode::full, 0, false},
          {"block_S1", ResidualMode::block, 1, false},
          {"block_S2", ResidualMode::block, 2, false},
          {"block_S3", ResidualMode::block, 3, false},
          {"block_S2_placeholder", ResidualMode::block, 2, true},
          {"block_S4", ResidualMode::block, 4, false}};
}

inline ForwardOptions options_for(const ModeCase& mode) {
  ForwardOptions options;
  options.mode = mode.mode;
  if (mode.block_size) options.block_size = mode.block_size;
  options.zero_placeholder = mode.zero_placeholder;
  return options;
}

// `bytes` of text made of a few repeated words and sentence ends (deterministic).
inline std::string sample_text(std::size_t bytes, std::uint64_t seed = 7) {
  const char* words[] = {"the ",  "cat ", "sat ",  "on ",  "a ",   "mat. ",
                         "dogs ", "run ", "fast ", "and ", "far. "};
  std::string text;
  std::uint64_t state = seed;
  while (text.size() < bytes) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    text += words[(state >> 33) % 11];
    if ((state >> 20) % 7 == 0) text += "\n";
  }
  return text;
}

}  // namespace attnres::test

// Helpers shared by the training suites (docs/training.md): the residual modes every gradient test
// covers, and text with structure a tiny model learns in a few steps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnres/backward.hpp"
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

// A scheme of docs/schemes.md with every other setting at its default.
inline AttnResConfig make_scheme(ResidualMode mode, int block_size = 0) {
  AttnResConfig scheme;
  scheme.mode = mode;
  scheme.block_size = block_size;
  return scheme;
}

// Every scheme of the zoo (docs/schemes.md) once, the settings alone or in small combinations,
// for models with L = 4 sublayers and d = 8 (block sizes up to 3, heads up to 4, m up to 3).
struct SchemeCase {
  std::string name;
  AttnResConfig scheme;
};

inline std::vector<SchemeCase> zoo_schemes() {
  std::vector<SchemeCase> cases;
  auto add = [&](const std::string& name, AttnResConfig s) { cases.push_back({name, s}); };
  AttnResConfig s = make_scheme(ResidualMode::full);
  s.gate = DepthGate::sigmoid;
  add("full_sigmoid", s);
  s.gate = DepthGate::sigmoid_normalized;
  add("full_sigmoid_normalized", s);
  s = make_scheme(ResidualMode::full);
  s.key_norm = false;
  add("full_no_key_norm", s);
  s = make_scheme(ResidualMode::full);
  s.window = 2;
  add("full_window2", s);
  s = make_scheme(ResidualMode::full);
  s.heads = 2;
  add("full_heads2", s);
  s = make_scheme(ResidualMode::block, 2);
  s.heads = 4;
  add("block_heads4", s);
  s = make_scheme(ResidualMode::full);
  s.query_source = QuerySource::input;
  add("full_input_query", s);
  s = make_scheme(ResidualMode::block, 3);
  s.query_source = QuerySource::input;
  s.gate = DepthGate::sigmoid_normalized;
  add("block_input_query", s);
  s = make_scheme(ResidualMode::full);
  s.mixing = DepthMixing::scalars;
  add("full_scalars", s);
  s = make_scheme(ResidualMode::block, 3);
  s.mixing = DepthMixing::scalars;
  s.gate = DepthGate::sigmoid;
  add("block_scalars_sigmoid", s);
  add("denseformer", make_scheme(ResidualMode::denseformer));
  add("rescaled", make_scheme(ResidualMode::rescaled));
  s = make_scheme(ResidualMode::mhc);
  s.streams = 2;
  s.sinkhorn_iterations = 5;
  add("mhc_dynamic_m2", s);
  s = make_scheme(ResidualMode::mhc);
  s.streams = 3;
  s.dynamic = false;
  add("mhc_static_m3", s);
  return cases;
}

// d loss / d x by central differences with step h, x an element of one of `model`'s tensors
// (restored afterwards); the loss by forward passes only (batch_loss).
inline double central_difference(const ModelWeights<double>& model,
                                 const std::vector<std::vector<int>>& batch,
                                 const ForwardOptions& options, double& x, double h) {
  const double saved = x;
  x = saved + h;
  const double up = batch_loss(model, batch, options);
  x = saved - h;
  const double down = batch_loss(model, batch, options);
  x = saved;
  return (up - down) / (2 * h);
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

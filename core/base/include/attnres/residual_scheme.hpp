// The residual scheme of a model: the mode (standard, Full / Block AttnRes, DenseFormer, rescaled,
// mHC) and every setting of its reads (docs/schemes.md; docs/math.md §2.1–2.3). It is the shared
// vocabulary of the model library (which runs a scheme) and the cost library (which costs one), so
// it lives in the base; config.json's `attn_res` object is read and written in model_config.hpp.
// Example:
//   AttnResConfig block;
//   block.mode = ResidualMode::block;
//   block.block_size = 4;
//   block.describe();   // "Block AttnRes (S = 4)"
#pragma once

#include <string>

#include "attnres/enum_names.hpp"

namespace attnres {

// The residual mechanism that forms each sublayer's input (docs/math.md §2.1–2.3 and
// docs/schemes.md): the standard residual, Full / Block AttnRes, DenseFormer, the rescaled
// residual (running mean) and mHC.
enum class ResidualMode { standard, full, block, denseformer, rescaled, mhc };
inline constexpr EnumNames<ResidualMode, 6> kResidualModeNames{
    {{ResidualMode::standard, "standard"},
     {ResidualMode::full, "full"},
     {ResidualMode::block, "block"},
     {ResidualMode::denseformer, "denseformer"},
     {ResidualMode::rescaled, "rescaled"},
     {ResidualMode::mhc, "mhc"}}};

std::string to_string(ResidualMode mode);
// Parses a mode name; throws attnres::Error naming `what` otherwise.
ResidualMode parse_residual_mode(const std::string& text, const std::string& what);

// How scores become depth weights (docs/schemes.md "Gate").
enum class DepthGate { softmax, sigmoid, sigmoid_normalized };
inline constexpr EnumNames<DepthGate, 3> kDepthGateNames{
    {{DepthGate::softmax, "softmax"},
     {DepthGate::sigmoid, "sigmoid"},
     {DepthGate::sigmoid_normalized, "sigmoid_normalized"}}};
std::string to_string(DepthGate gate);
DepthGate parse_depth_gate(const std::string& text, const std::string& what);

// Where the pseudo-query comes from: a learned vector, or that vector plus a projection of the
// read's most recent source (docs/schemes.md "Scores").
enum class QuerySource { fixed, input };
inline constexpr EnumNames<QuerySource, 2> kQuerySourceNames{
    {{QuerySource::fixed, "static"}, {QuerySource::input, "input"}}};
std::string to_string(QuerySource source);
QuerySource parse_query_source(const std::string& text, const std::string& what);

// Scores from a query against key-normed sources, or learned logits per (read, source).
enum class DepthMixing { attention, scalars };
inline constexpr EnumNames<DepthMixing, 2> kDepthMixingNames{
    {{DepthMixing::attention, "attention"}, {DepthMixing::scalars, "scalars"}}};
std::string to_string(DepthMixing mixing);
DepthMixing parse_depth_mixing(const std::string& text, const std::string& what);

// Every setting of the residual scheme (docs/schemes.md). The defaults give plain Full / Block
// AttnRes as in the paper.
struct AttnResConfig {
  ResidualMode mode = ResidualMode::standard;
  int block_size = 0;          // S in sublayers; 0 = not set (only meaningful for block mode)
  double key_norm_eps = 1e-6;  // eps of KeyNorm (docs/math.md §2.2)
  // Full / Block reads.
  DepthGate gate = DepthGate::softmax;
  bool key_norm = true;  // false: score the raw sources
  int window = 0;        // Full only: the embedding plus the last W outputs; 0 = all
  int heads = 1;         // depth-attention heads (channel groups of d / heads)
  QuerySource query_source = QuerySource::fixed;
  DepthMixing mixing = DepthMixing::attention;
  // mHC.
  int streams = 4;      // m
  bool dynamic = true;  // input-dependent coefficients (false: static biases only)
  int sinkhorn_iterations = 20;

  // Full or Block AttnRes (the modes that take the read keys above).
  bool attention_mode() const { return mode == ResidualMode::full || mode == ResidualMode::block; }
  // Modes whose sublayer inputs are weighted sums over a list of sources (Full, Block,
  // DenseFormer, rescaled): everything but the standard residual and mHC.
  bool reads_sources() const {
    return attention_mode() || mode == ResidualMode::denseformer || mode == ResidualMode::rescaled;
  }
  // Reads score sources with a query (mixing = attention in Full / Block).
  bool uses_query() const { return attention_mode() && mixing == DepthMixing::attention; }
  // Plain Full / Block / standard with the paper's defaults: what the fast engines implement.
  bool paper_defaults() const;
  // Phase 1 can stack a group's queries into one product over the shared history (softmax, a
  // static query, attention mixing, one head: the paper's schedule, and the fast engines').
  // Every other scheme whose two_phase_limit() is empty merges per-read statistics instead.
  bool stacked_two_phase() const;
  // Why the two-phase schedule does not apply, or "" when it applies (docs/schemes.md).
  std::string two_phase_limit() const;
  // Short human name, e.g. "Block AttnRes (S = 4), sigmoid gate, no key norm".
  std::string describe() const;
  // The non-default settings as "key=value" items for labels: "gate=sigmoid key_norm=off".
  std::string settings_label() const;
  bool operator==(const AttnResConfig& other) const;
  bool operator!=(const AttnResConfig& other) const { return !(*this == other); }
};

}  // namespace attnres

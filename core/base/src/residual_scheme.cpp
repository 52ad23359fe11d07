#include "attnres/residual_scheme.hpp"

namespace attnres {

std::string to_string(ResidualMode mode) {
  return enum_name(kResidualModeNames, mode);
}

ResidualMode parse_residual_mode(const std::string& text, const std::string& what) {
  return parse_enum(kResidualModeNames, text, what, "unknown residual mode");
}

std::string to_string(DepthGate gate) {
  return enum_name(kDepthGateNames, gate);
}

DepthGate parse_depth_gate(const std::string& text, const std::string& what) {
  return parse_enum(kDepthGateNames, text, what, "unknown gate");
}

std::string to_string(QuerySource source) {
  return enum_name(kQuerySourceNames, source);
}

QuerySource parse_query_source(const std::string& text, const std::string& what) {
  return parse_enum(kQuerySourceNames, text, what, "unknown query source");
}

std::string to_string(DepthMixing mixing) {
  return enum_name(kDepthMixingNames, mixing);
}

DepthMixing parse_depth_mixing(const std::string& text, const std::string& what) {
  return parse_enum(kDepthMixingNames, text, what, "unknown mixing");
}

bool AttnResConfig::operator==(const AttnResConfig& o) const {
  return mode == o.mode && block_size == o.block_size && key_norm_eps == o.key_norm_eps &&
         gate == o.gate && key_norm == o.key_norm && window == o.window && heads == o.heads &&
         query_source == o.query_source && mixing == o.mixing && streams == o.streams &&
         dynamic == o.dynamic && sinkhorn_iterations == o.sinkhorn_iterations;
}

bool AttnResConfig::paper_defaults() const {
  if (mode == ResidualMode::standard) return true;
  return attention_mode() && gate == DepthGate::softmax && key_norm && window == 0 && heads == 1 &&
         query_source == QuerySource::fixed && mixing == DepthMixing::attention;
}

bool AttnResConfig::stacked_two_phase() const {
  return attention_mode() && gate == DepthGate::softmax && heads == 1 &&
         query_source == QuerySource::fixed && mixing == DepthMixing::attention;
}

std::string AttnResConfig::two_phase_limit() const {
  switch (mode) {
    case ResidualMode::standard:
      return "the standard residual keeps a running sum (no reads)";
    case ResidualMode::mhc:
      return "mHC updates its stream state in place (no reads over a stored history)";
    default:
      break;
  }
  if (attention_mode() && mixing == DepthMixing::attention && query_source == QuerySource::input) {
    return "an input-dependent query needs each read's latest source, which phase 1 does not have";
  }
  return "";
}

std::string AttnResConfig::settings_label() const {
  std::string out;
  auto add = [&out](const std::string& item) {
    if (!out.empty()) out += ' ';
    out += item;
  };
  if (attention_mode()) {
    if (mixing != DepthMixing::attention) add("mixing=" + to_string(mixing));
    if (gate != DepthGate::softmax) add("gate=" + to_string(gate));
    if (!key_norm) add("key_norm=off");
    if (window > 0) add("window=" + std::to_string(window));
    if (heads != 1) add("heads=" + std::to_string(heads));
    if (query_source != QuerySource::fixed) add("query=" + to_string(query_source));
  }
  if (mode == ResidualMode::mhc) {
    add("m=" + std::to_string(streams));
    if (!dynamic) add("static");
    if (sinkhorn_iterations != 20) add("sinkhorn=" + std::to_string(sinkhorn_iterations));
  }
  return out;
}

std::string AttnResConfig::describe() const {
  std::string out;
  switch (mode) {
    case ResidualMode::standard:
      return "standard residual";
    case ResidualMode::full:
      out = "Full AttnRes";
      break;
    case ResidualMode::block:
      out = "Block AttnRes (S = " + std::to_string(block_size) + ")";
      break;
    case ResidualMode::denseformer:
      return "DenseFormer";
    case ResidualMode::rescaled:
      return "rescaled residual (running mean)";
    case ResidualMode::mhc:
      return std::string(dynamic ? "mHC" : "static mHC") + " (m = " + std::to_string(streams) + ")";
  }
  if (mixing == DepthMixing::scalars) out += ", input-independent scalars";
  if (gate == DepthGate::sigmoid) out += ", sigmoid gate";
  if (gate == DepthGate::sigmoid_normalized) out += ", normalised sigmoid gate";
  if (!key_norm) out += ", no key norm";
  if (window > 0) out += ", window " + std::to_string(window);
  if (heads != 1) out += ", " + std::to_string(heads) + " heads";
  if (query_source == QuerySource::input) out += ", input-dependent query";
  return out;
}

}  // namespace attnres

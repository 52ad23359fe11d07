// The Depth attention and Magnitudes views' results (model_results.hpp).
#include "model_results.hpp"

#include <algorithm>

#include "attnres/model_charts.hpp"

namespace attnres::gui {

namespace {

std::string origin_line(const ModelSnapshot& snapshot) {
  if (!snapshot.opened)
    return "Weights: the random model (made in the lab from its settings; no "
           "checkpoint).";
  const OpenedModel& opened = *snapshot.opened;
  std::string line = snapshot.origin == "trained" ? "Weights: the shipped trained model in "
                                                  : "Weights: read from ";
  line += opened.directory;
  line += ", ";
  line += checkpoint_summary(opened.checkpoint);
  line += ".";
  for (const std::string& note : opened.checkpoint.notes) {
    line += " Note: ";
    line += note;
    line += ".";
  }
  return line;
}

}  // namespace

RoutingResult routing_result(const ForwardTrace& trace, const ModelWeights<double>& model,
                             const std::string& label, const ModelSnapshot& snapshot) {
  RoutingResult out;
  out.label = label;
  out.sublayers = model.config.sublayers();
  out.tokens = trace.tokens;
  out.routing = routing_statistics(trace);
  const AttnResConfig& scheme = model.config.attn_res;
  if (scheme.uses_query()) out.cosines = row_cosines(effective_queries(model));
  out.origin = origin_line(snapshot);
  if (out.routing.empty()) {
    out.note = scheme.describe() +
               " has no depth reads: every sublayer adds its output to the "
               "running sum, so there is no routing to measure.";
  } else if (!scheme.attention_mode() || scheme.gate != DepthGate::softmax) {
    out.note = scheme.describe() +
               " does not weigh its sources with a softmax: the weights need "
               "not sum to 1, and entropy and top-1 mass describe them only "
               "loosely.";
  } else if (scheme.heads > 1) {
    out.note = "Multi-head reads: the statistics of each read's weights averaged over its heads.";
  }
  return out;
}

DepthAttentionResult depth_attention_result(const ModelSnapshot& snapshot, const SchemePicks& picks,
                                            const Progress& progress) {
  DepthAttentionResult out;
  const auto built = snapshot.build();
  const ModelWeights<double>& model = *built;
  out.tokens = snapshot.token_ids(model.config);
  const std::vector<SchemeOnModel> runs = picked_models(picks, model, snapshot);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    // This view shows alpha only: no mixing matrix.
    out.shown.push_back({runs[i].label, scheme_trace(runs[i].model, out.tokens,
                                                     step(progress, i, runs.size()), false)});
  }
  out.bytes = !snapshot.origin.empty();  // trained and loaded models read text bytes
  out.first = std::make_shared<const ModelWeights<double>>(runs.front().model);
  out.first_label = runs.front().label;
  for (const auto& s : out.shown) out.heads = std::max(out.heads, trace_heads(s.trace));
  out.routing = routing_result(out.shown.front().trace, *out.first, out.first_label, snapshot);
  return out;
}

std::vector<HeatmapSpec> depth_attention_maps(const DepthAttentionResult& result,
                                              const DepthAttentionState& state) {
  std::vector<HeatmapSpec> maps;
  for (const ShownScheme& shown : result.shown) {
    const ForwardTrace& trace = shown.trace;
    maps.push_back(alpha_heatmap(trace, alpha_title(shown.label, trace, state.token, state.head),
                                 state.token, state.head));
  }
  return maps;
}

std::array<ChartSpec, 2> magnitudes_result(const ModelSnapshot& snapshot, const SchemePicks& picks,
                                           const Progress& progress) {
  const auto built = snapshot.build();
  const ModelWeights<double>& model = *built;
  const auto tokens = snapshot.token_ids(model.config);
  std::vector<SchemeOnModel> runs = picked_models(picks, model, snapshot);
  const std::size_t picked = runs.size();
  if (std::none_of(runs.begin(), runs.end(), [](const SchemeOnModel& r) {
        return r.scheme.mode == ResidualMode::standard;
      })) {
    SchemeOnModel reference;
    reference.name = reference.scheme.describe() + " (reference)";
    reference.model = convert_scheme(model, reference.scheme);
    runs.push_back(std::move(reference));
  }
  std::vector<ForwardTrace> traces;
  for (std::size_t m = 0; m < runs.size(); ++m)
    traces.push_back(scheme_trace(runs[m].model, tokens, step(progress, m, runs.size()), false));
  std::vector<MagnitudeCurve> curves;
  for (std::size_t m = 0; m < runs.size(); ++m)
    curves.push_back({runs[m].name, &traces[m], m >= picked});
  // Legends name the schemes; the titles say whose weights (a trained or loaded model's).
  const std::string weights =
      snapshot.origin.empty() ? std::string()
                              : snapshot.origin + " " + model.config.attn_res.describe() + " model";
  return magnitude_charts(curves, weights);
}

}  // namespace attnres::gui

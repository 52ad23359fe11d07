// The Duality view's results (duality_results.hpp): the rank taxonomy and one run's forward
// passes, figures and caption, computed off the GUI thread with no widget.
#include "duality_results.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/forward.hpp"
#include "attnres/layers.hpp"
#include "attnres/model_charts.hpp"
#include "model_state.hpp"

namespace attnres::gui {

double depth_parameter_sigma(const ModelWeights<double>& model) {
  const double rms = pseudo_query_rms(model);
  return rms > 0.0 ? rms : 0.5;
}

ModelWeights<double> with_drawn_parameters(const ModelWeights<double>& model,
                                           const AttnResConfig& scheme, double sigma,
                                           std::uint64_t seed, std::string& parameters) {
  ModelWeights<double> out = convert_scheme(model, scheme);
  parameters = "none";
  if (scheme.mode == ResidualMode::standard || scheme.mode == ResidualMode::rescaled) return out;
  std::map<std::string, std::vector<std::int64_t>> own;
  for_each_tensor(model, [&](const TensorView& tensor) {
    if (!tensor.attn_res || model.has_attn_res_tensors) own.emplace(tensor.name, tensor.shape);
  });
  const ModelWeights<double> drawn =
      random_model(out.config, {.seed = seed, .weight_std = 0.02, .query_std = sigma});
  std::map<std::string, const double*> drawn_data;
  for_each_tensor(drawn,
                  [&](const TensorView& tensor) { drawn_data.emplace(tensor.name, tensor.data); });
  std::vector<std::pair<std::string, bool>> kinds;  // (kind, drawn), in tensor order
  for_each_tensor(out, [&](const TensorVisit& tensor) {
    const char* kind = depth_mixing_parameter_kind(tensor.name);
    if (kind == nullptr) return;
    const auto it = own.find(tensor.name);
    const bool from_model = it != own.end() && it->second == tensor.shape;
    if (!from_model) {
      const double* source = drawn_data.at(tensor.name);
      std::copy(source, source + tensor.element_count(), tensor.data);
    }
    auto entry =
        std::find_if(kinds.begin(), kinds.end(), [kind](const auto& k) { return k.first == kind; });
    if (entry == kinds.end()) {
      kinds.emplace_back(kind, !from_model);
    } else {
      entry->second = entry->second || !from_model;
    }
  });
  if (kinds.empty()) {
    if (scheme.mode == ResidualMode::mhc) parameters = "biases at their start";
    return out;
  }
  parameters.clear();
  for (const auto& [kind, was_drawn] : kinds) {
    if (!parameters.empty()) parameters += "; ";
    parameters += was_drawn ? "drawn " : "model's ";
    parameters += kind;
    if (was_drawn)
      parameters += scheme.mode == ResidualMode::denseformer ? " 1 + N(0, σ²)" : " N(0, σ²)";
  }
  return out;
}

TaxonomyRow taxonomy_row(std::string scheme, std::string parameters, const ForwardTrace& trace) {
  TaxonomyRow row{std::move(scheme), std::move(parameters), {}, {}, 0, 0, 0, true, true};
  const RankBound bound = rank_bound(trace);
  row.rule = bound.rule;
  row.detail = bound.detail;
  row.mean_bounded = bound.mean_bounded;
  for (std::size_t k = 0; k < bound.per_cut.size(); ++k) {
    const int mean = k < trace.semiseparable_rank.size() ? trace.semiseparable_rank[k] : 0;
    const int token = k < trace.semiseparable_rank_max.size() ? trace.semiseparable_rank_max[k] : 0;
    row.mean_rank = std::max(row.mean_rank, mean);
    row.token_rank = std::max(row.token_rank, token);
    row.bound = std::max(row.bound, bound.per_cut[k]);
    if (token > bound.per_cut[k] || (bound.mean_bounded && mean > bound.per_cut[k]))
      row.holds = false;
  }
  return row;
}

std::vector<AttnResConfig> taxonomy_schemes(const ModelConfig& model, int block_size) {
  std::vector<AttnResConfig> schemes(7);
  schemes[0].mode = ResidualMode::standard;
  schemes[1].mode = ResidualMode::full;
  schemes[2].mode = ResidualMode::block;
  schemes[2].block_size = model.attn_res.mode == ResidualMode::block
                              ? model.attn_res.block_size
                              : std::clamp(block_size, 1, std::max(1, model.sublayers()));
  schemes[3].mode = ResidualMode::denseformer;
  schemes[4].mode = ResidualMode::rescaled;
  schemes[5].mode = ResidualMode::mhc;
  schemes[5].streams = 2;
  schemes[6].mode = ResidualMode::mhc;
  schemes[6].streams = 4;
  return schemes;
}

namespace {

// The picked schemes: their traces (with the mixing matrices) and their taxonomy rows.
void picked_scheme_rows(const std::vector<SchemeOnModel>& runs, const std::vector<int>& tokens,
                        const Progress& progress, std::size_t passes, DualityResult& out) {
  const char* roles[] = {"scheme ▸ ", "compare ▸ "};
  for (std::size_t i = 0; i < runs.size(); ++i) {
    out.shown.push_back(
        {runs[i].label, scheme_trace(runs[i].model, tokens, step(progress, i, passes), true)});
    out.rows.push_back(taxonomy_row(std::string(roles[i]) + runs[i].scheme.describe(),
                                    "as shown above", out.shown.back().trace));
  }
}

// The reference rows: one forward pass per kind of scheme, the parameters it adds drawn.
void reference_rows(const ModelWeights<double>& model, const std::vector<AttnResConfig>& references,
                    const std::vector<int>& tokens, double sigma, std::uint64_t seed,
                    const Progress& progress, std::size_t first_pass, std::size_t passes,
                    DualityResult& out) {
  for (std::size_t i = 0; i < references.size(); ++i) {
    std::string parameters;
    const auto drawn = with_drawn_parameters(model, references[i], sigma, seed, parameters);
    const ForwardTrace trace =
        scheme_trace(drawn, tokens, step(progress, first_pass + i, passes), true);
    out.rows.push_back(taxonomy_row(references[i].describe(), std::move(parameters), trace));
    if (references[i].mode == ResidualMode::standard) out.standard = trace;
  }
}

// The sequence side: one head's attention in the chosen layer, on that layer's real input under
// the picked scheme (a reference pass that records every sublayer's input h).
Eigen::MatrixXd sequence_attention(const ModelWeights<double>& model,
                                   const std::vector<int>& tokens, int layer, int head,
                                   const Progress& progress) {
  std::vector<Eigen::MatrixXd> layer_inputs;
  ForwardOptions capture;
  capture.record_mixing = false;
  capture.sublayer_inputs = &layer_inputs;
  capture.progress = check_only(progress);
  forward(model, tokens, capture);
  return attention_probabilities(model, layer, head,
                                 layer_inputs.at(static_cast<std::size_t>(2 * layer)));
}

std::string taxonomy_caption(const ModelConfig& model, std::size_t tokens, double sigma,
                             const std::vector<TaxonomyRow>& rows) {
  char text[400];
  std::snprintf(text, sizeof text,
                "Semiseparable rank of the depth mixing matrix M by forward passes on "
                "these weights (L = %d, "
                "T = %d tokens), the largest over the cuts k = 1..L. Depth parameters a "
                "scheme adds are drawn "
                "with σ = %.3g (the model's query RMS, else 0.5).",
                model.sublayers(), static_cast<int>(tokens), sigma);
  std::string caption = text;
  if (std::any_of(rows.begin(), rows.end(),
                  [](const TaxonomyRow& row) { return !row.mean_bounded; })) {
    caption +=
        " *: the token mean of input-dependent mHC matrices is not bounded by m; each "
        "token's M is.";
  }
  return caption;
}

}  // namespace

DualityResult duality_result(const std::vector<SchemeOnModel>& runs,
                             const ModelWeights<double>& model, const std::vector<int>& tokens,
                             std::uint64_t seed, int layer, int head, int block_size,
                             const Progress& progress) {
  DualityResult out;
  const std::vector<AttnResConfig> references = taxonomy_schemes(model.config, block_size);
  const std::size_t passes = runs.size() + references.size();
  picked_scheme_rows(runs, tokens, progress, passes, out);
  const double sigma = depth_parameter_sigma(model);
  reference_rows(model, references, tokens, sigma, seed, progress, runs.size(), passes, out);
  const int shown_layer = std::min(layer, model.config.num_hidden_layers - 1);
  const int shown_head = std::min(head, model.config.num_attention_heads - 1);
  const Eigen::MatrixXd attention_d =
      sequence_attention(runs[0].model, tokens, shown_layer, shown_head, progress);
  // The figures, built by the core (attnres forward --chart draws the same ones).
  std::vector<const ForwardTrace*> depth_traces;
  for (const auto& one : out.shown) {
    out.mixing.push_back(mixing_heatmap(one.trace, one.label));
    depth_traces.push_back(&one.trace);
  }
  out.ranks = depth_rank_chart(depth_traces);
  out.sequence = sequence_attention_heatmap(attention_d, shown_layer, shown_head);
  out.running = running_sum_heatmap(static_cast<int>(attention_d.rows()));
  out.sequence_ranks = sequence_rank_chart(attention_d);
  out.caption = taxonomy_caption(model.config, tokens.size(), sigma, out.rows);
  out.attention = attention_d;
  return out;
}

namespace {

// The cut of `matrix` at k (clamped to 1..rows-1), boxed on `map` with its label.
DualityCut cut_of(const Eigen::MatrixXd& matrix, int k, HeatmapSpec& map) {
  DualityCut cut;
  const auto n = static_cast<int>(matrix.rows());
  if (n < 2) return cut;
  cut.k = std::clamp(k, 1, n - 1);
  const Eigen::VectorXd singular = cut_singular_values(matrix, cut.k);
  cut.rank = numerical_rank(singular, 1e-6);
  cut.singular.assign(singular.data(), singular.data() + singular.size());
  map.boxes.push_back({cut.k, n - cut.k, 0, cut.k, cut_label(cut)});
  return cut;
}

// The lower triangle of ones (the standard residual's M and the running sum: a state of one).
Eigen::MatrixXd lower_ones(Eigen::Index n) {
  return Eigen::MatrixXd::Ones(n, n).triangularView<Eigen::Lower>();
}

// What the hover says about source i of a depth map: which output it is and its RMS.
std::vector<std::string> source_notes(const ForwardTrace& trace) {
  std::vector<std::string> notes;
  const int L = trace.sublayers;
  for (int i = 0; i <= L; ++i) {
    std::string note = i == 0 ? "the embedding" : i % 2 == 1 ? "attention" : "MLP";
    if (i > 0) {
      note += " output of layer ";
      note += std::to_string((i + 1) / 2);
    }
    const double rms = i == 0
                           ? (trace.sublayer_input_rms.empty() ? NAN : trace.sublayer_input_rms[0])
                           : (static_cast<std::size_t>(i) <= trace.sublayer_output_rms.size()
                                  ? trace.sublayer_output_rms[static_cast<std::size_t>(i - 1)]
                                  : NAN);
    if (std::isfinite(rms)) {
      note += ", RMS ";
      note += format_number(std::round(rms * 1e4) / 1e4);
    }
    notes.push_back(std::move(note));
  }
  return notes;
}

}  // namespace

std::string cut_label(const DualityCut& cut) {
  std::string label = "k = ";
  label += std::to_string(cut.k);
  label += ": rank ";
  label += std::to_string(cut.rank);
  label += " (σ ";
  const std::size_t shown =
      std::min<std::size_t>(cut.singular.size(), std::max(1, std::min(cut.rank, 3)));
  for (std::size_t i = 0; i < shown; ++i) {
    if (i > 0) label += ", ";
    char number[32];
    std::snprintf(number, sizeof number, "%.3g", cut.singular[i]);
    label += number;
  }
  label += ")";
  return label;
}

DualityQuad duality_quad(const DualityResult& result, int token, int cut,
                         const std::vector<std::string>& token_names) {
  DualityQuad quad;
  if (result.shown.empty()) return quad;
  const ForwardTrace& picked = result.shown.front().trace;
  const bool one_token =
      token >= 0 && static_cast<std::size_t>(token) < picked.mixing_per_token.size();
  const std::string& label = result.shown.front().label;
  quad.scheme = one_token ? mixing_heatmap(picked, label, token) : mixing_heatmap(picked, label);
  const Eigen::MatrixXd& scheme_m =
      one_token ? picked.mixing_per_token[static_cast<std::size_t>(token)] : picked.mixing_mean;
  // The standard residual's M: computed by its forward pass (all ones below the diagonal).
  const ForwardTrace& standard = result.standard;
  const bool have_standard = standard.mixing_mean.rows() == scheme_m.rows();
  const Eigen::MatrixXd standard_m =
      have_standard ? (one_token ? standard.mixing_per_token[static_cast<std::size_t>(token)]
                                 : standard.mixing_mean)
                    : lower_ones(scheme_m.rows());
  ForwardTrace standard_shown = standard;
  standard_shown.mixing_mean = standard_m;
  quad.standard = mixing_heatmap(standard_shown, "standard residual");
  quad.standard.title = "depth: standard residual, M = all ones (a running sum over depth)";
  quad.running = result.running;
  quad.running.title = "sequence: running sum over tokens (RNN / linear attention)";
  quad.attention = result.sequence;
  // One colour scale for the four.
  double low = 0.0, high = 1.0;
  for (const HeatmapSpec* map : {&quad.standard, &quad.scheme, &quad.running, &quad.attention}) {
    low = std::min(low, map->low);
    high = std::max(high, map->high);
  }
  for (HeatmapSpec* map : {&quad.standard, &quad.scheme, &quad.running, &quad.attention}) {
    map->low = low;
    map->high = high;
  }
  // The cut on all four.
  quad.standard_cut = cut_of(standard_m, cut, quad.standard);
  quad.scheme_cut = cut_of(scheme_m, cut, quad.scheme);
  const auto T = result.attention.rows();
  quad.running_cut = cut_of(lower_ones(T), cut, quad.running);
  quad.attention_cut = cut_of(result.attention, cut, quad.attention);
  // The hover: sources with their norms; tokens by name; the token's row outlined.
  quad.standard.column_notes = quad.scheme.column_notes = source_notes(picked);
  for (HeatmapSpec* map : {&quad.running, &quad.attention}) {
    map->row_notes = map->column_notes = token_names;
    if (one_token && token < T) map->boxes.push_back({token, 1, 0, token + 1, ""});
  }
  return quad;
}

DualityRun duality_run(const ModelSnapshot& snapshot, const DualityState& state,
                       const Progress& progress) {
  const auto built = snapshot.build();
  const ModelWeights<double>& model = *built;
  const auto check = [](int value, int count, const char* field) {
    if (value < 0 || value >= count) {
      throw Error(std::string(field) + " " + std::to_string(value) +
                  " is outside the model (0 .. " + std::to_string(count - 1) + ")");
    }
  };
  check(state.layer, model.config.num_hidden_layers, "sequence layer");
  check(state.head, model.config.num_attention_heads, "sequence head");
  const auto tokens = snapshot.token_ids(model.config);
  const std::vector<SchemeOnModel> runs = picked_models(state.picks, model, snapshot);
  DualityRun out;
  for (const int id : tokens) {
    std::string name = "id ";
    name += std::to_string(id);
    if (!snapshot.origin.empty() && id >= 32 && id < 127) {  // trained models read bytes
      name += " '";
      name += static_cast<char>(id);
      name += "'";
    }
    out.token_names.push_back(std::move(name));
  }
  out.result = duality_result(runs, model, tokens, snapshot.random.seed + 1000, state.layer,
                              state.head, snapshot.block_size, progress);
  return out;
}

}  // namespace attnres::gui

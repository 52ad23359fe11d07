// What the Depth attention and Magnitudes views compute, with no widget (docs/architecture.md
// "The GUI's models"): each view's state (the two scheme pickers, and the token and head a depth
// map shows) and a pure function from a snapshot of the lesson model (model_state.hpp) and that
// state to what the view draws — the alpha maps and routing statistics of docs/math.md §2.2 and
// docs/interop.md, the RMS by depth of the paper's Fig. 5b question — on the core's chart
// builders (model_charts.hpp), as `attnres forward --chart` and `attnres inspect` draw them.
#pragma once

#include <Eigen/Core>
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnres/chart_spec.hpp"
#include "attnres/routing_stats.hpp"
#include "model_state.hpp"

namespace attnres::gui {

// What the page shows, computed off the GUI thread.
struct RoutingResult {
  std::string label;  // the scheme and whose weights (the view's first map)
  int sublayers = 0;
  int tokens = 0;
  std::vector<ReadRouting> routing;        // empty: the scheme has no depth reads (standard)
  std::optional<Eigen::MatrixXd> cosines;  // the pseudo-queries' (Full and Block AttnRes only)
  std::string origin;                      // where the weights came from (the checkpoint line)
  std::string note;                        // what the numbers mean for this scheme, when special
};

// The routing of `trace` (a forward pass of `model`, the view's first scheme on the lesson model
// of `snapshot`); `label` names the scheme.
RoutingResult routing_result(const ForwardTrace& trace, const ModelWeights<double>& model,
                             const std::string& label, const ModelSnapshot& snapshot);

// The Depth attention view's inputs beside the lesson model's: the schemes, and which token and
// head its maps show (-1: the mean over tokens / over heads).
struct DepthAttentionState {
  SchemePicks picks;
  int token = -1;
  int head = -1;
};

// One run of the Depth attention view: the picked schemes' forward passes on the lesson model.
struct DepthAttentionResult {
  std::vector<ShownScheme> shown;  // the picked schemes (one, or two when comparing)
  std::vector<int> tokens;
  bool bytes = false;  // a trained or loaded model: the tokens are a text's bytes
  std::shared_ptr<const ModelWeights<double>> first;  // the first scheme's weights
  std::string first_label;
  int heads = 1;          // the most depth-attention heads of a shown scheme
  RoutingResult routing;  // the first scheme's routing statistics
};

// The forward passes (no mixing matrices: the view shows alpha only) and the routing page.
DepthAttentionResult depth_attention_result(const ModelSnapshot& snapshot, const SchemePicks& picks,
                                            const Progress& progress = {});

// The maps the view draws for `state`'s token and head (alpha_heatmap, one per shown scheme).
std::vector<HeatmapSpec> depth_attention_maps(const DepthAttentionResult& result,
                                              const DepthAttentionState& state);

// The Magnitudes view's two charts: the RMS of each sublayer's input and output by depth for the
// picked schemes, and the standard residual on the same weights for reference unless a picked
// scheme is standard (magnitude_charts).
std::array<ChartSpec, 2> magnitudes_result(const ModelSnapshot& snapshot, const SchemePicks& picks,
                                           const Progress& progress = {});

}  // namespace attnres::gui

// The caveat of the paper's Fig. 6 overlay on sweeps (sweep.hpp paper_fig6_warning).
#include "attnres/error.hpp"
#include "attnres/paper_reference.hpp"
#include "attnres/sweep.hpp"

namespace attnres {

std::string paper_fig6_warning(const SweepSpec& spec, const CostInputs& base) {
  if (spec.overlay != "paper_fig6") return {};
  std::int64_t sublayers = base.sublayers;
  try {
    sublayers = resolve_cost_inputs(base).sublayers;
  } catch (const Error&) {
  }
  if (sublayers == paper::kFig6Sublayers) return {};
  const std::string fig6_l = std::to_string(paper::kFig6Sublayers);
  std::string warning = "Warning: the paper's Fig. 6 losses come from its ";
  warning += fig6_l + "-sublayer ablation model (N = " + fig6_l +
             " / S), not from this sweep's model (L = ";
  warning += std::to_string(sublayers);
  warning += "): they are drawn for orientation only.";
  return warning;
}

}  // namespace attnres

// The shared first and last steps of the fast engines' forward passes (fast_pass.hpp).
#include "src/fast_pass.hpp"

#include <climits>

#include "attnres/cancel.hpp"
#include "attnres/error.hpp"
#include "attnres/forward_steps.hpp"

namespace attnres::engine {

bool reference_only(const ForwardOptions& options) {
  return options.mask || options.sublayer_inputs;
}

bool fast_engines_run(const AttnResConfig& scheme, FastEngine engine) {
  return engine == FastEngine::cpu || scheme.paper_defaults();
}

FastPass start_fast_pass(ForwardTrace& trace, const ModelConfig& config,
                         const std::vector<int>& tokens, const ForwardOptions& options,
                         FastEngine engine) {
  check_tokens(config, tokens);
  const AttnResConfig scheme = resolve_scheme(config, options);
  if (!fast_engines_run(scheme, engine)) {  // the CUDA engine's refusal
    throw Error(
        "the CUDA engine runs the standard residual and the paper's Full / Block AttnRes only; " +
        scheme.describe() + " runs on the CPU engines (--device cpu; docs/schemes.md)");
  }
  FastPass pass{scheme, make_depth_layout(scheme, config.sublayers(), options.zero_placeholder)};
  if (tokens.size() > static_cast<std::size_t>(INT_MAX)) throw Error("forward: too many tokens");
  pass.T = static_cast<int>(tokens.size());
  trace = start_trace(pass.scheme, pass.layout, pass.T, options);
  return pass;
}

void report_sublayer_progress(const ForwardOptions& options, int r, int L) {
  report_progress(options.progress, static_cast<std::size_t>(r), static_cast<std::size_t>(L),
                  "forward pass");
}

std::string sublayer_input_name(int r, int L) {
  return "the input h of " + read_target_name(r, L);
}

std::string sublayer_output_name(int r, int L) {
  return "the output v of " + read_target_name(r, L);
}

template <typename Scalar>
void finish_fast_pass(ForwardResult<Scalar>& result, const ForwardOptions& options) {
  const auto T = static_cast<long>(result.hidden_final.rows());
  const auto d = static_cast<long>(result.hidden_final.cols());
  const auto vocab = static_cast<long>(result.logits.cols());
  require_finite(result.hidden_final.data(), T, d, d, "the final read's output");
  require_finite(result.logits.data(), T, vocab, vocab, "the logits");
  if (options.record_mixing) record_mixing(result.trace, options);
}

template void finish_fast_pass(ForwardResult<float>&, const ForwardOptions&);
template void finish_fast_pass(ForwardResult<double>&, const ForwardOptions&);

}  // namespace attnres::engine

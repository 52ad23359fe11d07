// The parts of a forward pass that the fast engines share, written once (docs/engines.md): what
// they run (ForwardEngine in engine.cpp sends the rest to the reference), and the first and last
// steps of every pass of the fast CPU engine (cpu/fast_forward.cpp) and of the CUDA engine
// (cuda/cuda_forward.cu): the checks of the tokens and of the scheme, the residual layout, the
// trace's header, progress before each sublayer, the reference's names in its finiteness errors,
// and the final checks. Internal to the engine library; plain C++ that nvcc also compiles (the
// CUDA engine's host code, C++20).
#pragma once

#include <string>
#include <vector>

#include "attnres/depth_layout.hpp"
#include "attnres/forward.hpp"

namespace attnres::engine {

// Masked reads (options.mask) and recorded sublayer inputs (options.sublayer_inputs) run on the
// reference only.
bool reference_only(const ForwardOptions& options);

// The fast engines: the CPU engine (cpu/) and the CUDA engine (cuda/).
enum class FastEngine { cpu, cuda };

// Whether a fast engine runs `scheme` (docs/schemes.md "Which schedules apply"): the CPU engine
// runs every scheme (the standard residual; Full / Block AttnRes with any setting; DenseFormer; the
// rescaled residual; mHC); the CUDA engine the paper's only (the standard residual, Full and Block
// AttnRes with softmax, key norm, a static query and one head) and refuses the others.
bool fast_engines_run(const AttnResConfig& scheme, FastEngine engine);

// What a fast pass is about to compute.
struct FastPass {
  AttnResConfig scheme;  // resolve_scheme(config, options)
  DepthLayout layout;    // its residual layout
  int T = 0;             // tokens
};

// The start of a fast forward pass: checks the tokens (check_tokens), resolves the scheme
// (resolve_scheme's errors) and refuses one that `engine` does not run, makes its layout,
// checks that the token count fits an int, and fills the trace's header (start_trace).
FastPass start_fast_pass(ForwardTrace& trace, const ModelConfig& config,
                         const std::vector<int>& tokens, const ForwardOptions& options,
                         FastEngine engine);

// Before sublayer r (0-based) of L: the reference's progress call, which throws
// Cancelled("forward pass cancelled") when the callback says stop.
void report_sublayer_progress(const ForwardOptions& options, int r, int L);

// What the reference's finiteness errors (require_finite) call the tensors of a pass.
inline constexpr const char* kEmbeddingName = "the token embedding v_0";
std::string sublayer_input_name(int r, int L);   // "the input h of <read target r>"
std::string sublayer_output_name(int r, int L);  // "the output v of <read target r>"

// The end of a fast pass: the reference's checks of the final read's output (hidden_final) and of
// the logits, then the mixing matrix when options.record_mixing.
template <typename Scalar>
void finish_fast_pass(ForwardResult<Scalar>& result, const ForwardOptions& options);

}  // namespace attnres::engine

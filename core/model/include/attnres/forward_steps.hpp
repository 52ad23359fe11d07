// The steps every forward engine shares (the readable reference in forward.cpp, the fast CPU
// engine and the CUDA engine in engine/): checking tokens, resolving the residual layout,
// grouping reads for the two-phase schedule, naming reads, and recording the trace parts that do
// not depend on how the numbers were computed (the depth mixing matrix and its ranks).
// docs/engines.md describes the engines; docs/math.md the conventions.
#pragma once

#include <string>
#include <vector>

#include "attnres/depth_layout.hpp"
#include "attnres/forward.hpp"

namespace attnres {

// Throws attnres::Error when `tokens` is empty or an id is outside [0, vocab).
void check_tokens(const ModelConfig& config, const std::vector<int>& tokens);

// The scheme a forward pass with `options` runs on `config`: the config's, with the options'
// mode and block size. Switching modes on the model's own tensors is allowed among standard /
// Full / Block with attention mixing; anything else needs convert_scheme (model.hpp). Throws
// attnres::Error for block mode without a block size, a block size outside 1..L, or settings
// that do not fit the mode.
AttnResConfig resolve_scheme(const ModelConfig& config, const ForwardOptions& options);

// The residual layout of resolve_scheme(config, options).
DepthLayout resolve_layout(const ModelConfig& config, const ForwardOptions& options);

// A trace with the header fields (scheme, L, S, T, schedule flags) filled and nothing recorded.
ForwardTrace start_trace(const AttnResConfig& scheme, const DepthLayout& layout, int tokens,
                         const ForwardOptions& options);

// Reads are scheduled in groups that share one phase-1 pass (docs/math.md, two-phase schedule):
// the reads of one block (Block AttnRes) or of one schedule block of round(sqrt(L)) sublayers
// (Full AttnRes; ForwardOptions::full_schedule_block overrides); the final read joins the last
// group. Returns group_of[r] for r = 0 .. L.
std::vector<int> schedule_groups(const DepthLayout& layout, const ForwardOptions& options);

// Sources shared by every read of reads first..last: the longest common prefix of their source
// lists (the completed history phase 1 reads once).
std::size_t shared_history(const DepthLayout& layout, int first, int last);

// Fills trace.mixing_per_token, mixing_mean and the semiseparable ranks from trace.reads (or the
// all-ones lower triangle of the standard residual). Called only when options.record_mixing.
void record_mixing(ForwardTrace& trace, const ForwardOptions& options);

// Throws attnres::Error naming `what`, the token and the channel of the first NaN/Inf in x.
template <typename Scalar>
void require_finite(const Scalar* x, long rows, long cols, long row_stride,
                    const std::string& what);

// True when every entry of the (rows, cols) block is finite (vectorised; no allocation).
template <typename Scalar>
bool all_finite(const Scalar* x, long rows, long cols, long row_stride);

// RMS over all entries of a (rows, cols) block, accumulated in double.
template <typename Scalar>
double rms_of(const Scalar* x, long rows, long cols, long row_stride);

}  // namespace attnres

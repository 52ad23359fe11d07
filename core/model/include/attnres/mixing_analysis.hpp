// Bounds of the depth-mixing analysis of a forward pass (record_mixing, docs/math.md §2.8): the
// per-token mixing matrices M_t and the semiseparable ranks grow with the depth L much faster
// than the pass itself (T matrices of (L+1)^2 numbers; the SVDs of every cut of an (L+1)^2
// matrix cost about (L+1)^4/32 multiply-adds), so above fixed sizes they are skipped, with a note
// (mixing_analysis_note), and the pass's other results stay whole.
#pragma once

#include <cstdint>
#include <string>

namespace attnres {

struct ForwardTrace;

// At most this many numbers (8 bytes each: 256 MB) in the T per-token matrices M_t together;
// above it only the mean M is kept.
inline constexpr double kMaxMixingPerTokenCells = 32e6;
// At most this many multiply-adds (about a second) in the SVDs of the semiseparable ranks: the
// mean's ranks need rank_analysis_work(L + 1), the per-token maxima T times that.
inline constexpr double kMaxRankAnalysisWork = 1e9;

// The multiply-adds of the SVDs of every cut M[k:, :k], k = 1 .. n-1, of an n x n matrix.
double rank_analysis_work(std::int64_t n);

struct MixingAnalysisPlan {
  bool per_token_matrices = true;  // mixing_per_token
  bool mean_ranks = true;          // semiseparable_rank
  bool token_ranks = true;         // semiseparable_rank_max
};
MixingAnalysisPlan plan_mixing_analysis(std::int64_t sublayers, std::int64_t tokens);

// What record_mixing left out for a pass of `trace.sublayers` and `trace.tokens`, in words ("" when
// nothing was).
std::string mixing_analysis_note(const ForwardTrace& trace);

}  // namespace attnres

// Measurements behind `attnres bench forward` (docs/engines.md): whole forward passes timed after
// a warm-up, the depth read alone in bytes/s, and the machine's stream (triad) bandwidth to
// compare it with; and behind `attnres calibrate --measure` (docs/calibration.md): the GEMM rate
// per precision, the per-call floor and the engine's depth reads of whole passes, one-shot,
// two-phase and stack-style. Timing is measured and reported, never asserted in tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"
#include "attnres/depth_layout.hpp"
#include "attnres/engine.hpp"
#include "attnres/enum_names.hpp"

namespace attnres {

// Deterministic pseudo-random token ids shared with the PyTorch peer (bench/peers/):
// t -> (1103515245 * (seed + t) + 12345) mod 2^31 mod vocab.
std::vector<int> benchmark_tokens(int count, int vocab, int seed = 0);

struct ForwardTiming {
  double seconds_per_forward = 0;  // median over the repeats
  double tokens_per_second = 0;    // tokens / seconds_per_forward
  std::vector<double> seconds;     // every timed repeat
};
// One warm-up pass, then `repeat` timed passes (options.record_mixing should be off).
template <typename Scalar>
ForwardTiming time_forward(ForwardEngine<Scalar>& engine, const std::vector<int>& tokens,
                           const ForwardOptions& options, int repeat,
                           const Progress& progress = {});

struct Bandwidth {
  double bytes = 0;    // bytes moved by one call
  double seconds = 0;  // best of the repeats
  double bytes_per_s() const { return seconds > 0 ? bytes / seconds : 0; }
};
// One-shot depth read of `sources` (T, d) sources in f32 through the fast engine's kernels
// (phase one + finish), split over `threads`: bytes = (sources + 1) * T * d * 4 (every source
// read once, h written once).
Bandwidth measure_depth_read(int sources, int T, int d, int threads, int repeat = 20);
// STREAM triad a = b + s c over three float arrays of `elements` each (3 * 4 bytes per element),
// split over `threads`, best of `repeat`. The default arrays (3 x 256 MiB) are far larger than
// the caches.
Bandwidth measure_stream_triad(int threads, std::size_t elements = std::size_t(1) << 26,
                               int repeat = 5);

// Peak resident memory of this process so far, in bytes.
std::size_t peak_resident_bytes();
// Physical memory of this machine, in bytes (0 when the system does not say).
double physical_memory_bytes();

// ------------------------------------------------------------------ calibrate --measure
// What `attnres calibrate --measure` measures to hold the cost model (docs/math.md §3.6) against
// the engine's own depth reads (docs/calibration.md, "Our own engine"). Every long function takes
// a Progress callback and throws attnres::Cancelled when it says stop (checked between repeats).

// One matrix product C (m, n) = A (m, k) B (k, n) of the fast engine's products (engine::Matmul:
// oneDNN, f32 accumulation; bf16 rounds the inputs, B once as the engine rounds its weights; f64
// on Eigen), rows split over `threads` workers with one Matmul each, as the engine splits them.
struct GemmTiming {
  Precision precision = Precision::f32;
  int m = 0, n = 0, k = 0;
  double seconds = 0;  // best of the repeats, after one warm-up
  double flops() const { return 2.0 * m * n * k; }
  double flops_per_s() const { return seconds > 0 ? flops() / seconds : 0; }
};
GemmTiming measure_gemm(Precision precision, int m, int n, int k, int threads, int repeat = 3,
                        const Progress& progress = {});

// The per-call floor: seconds of one thread-pool call holding a depth read so small (2 sources, 2
// tokens per thread, d = 64) that bandwidth does not matter: the median of `calls` calls run back
// to back (the median, not the best: it is what a pass of many calls pays per call).
double measure_call_floor(int threads, int calls = 1000, const Progress& progress = {});

// How the depth reads of a pass are implemented:
//   one_shot   the fast engine's one-shot read over its history arena: per read one phase-1 call
//              (q = 1) over the read's n sources in place, then one finish call (o / l -> h);
//   two_phase  the fast engine's two-phase schedule: one phase-1 call per group for all its reads
//              against the shared history, then per read one call that merges the sources made
//              inside the group and finishes (ForwardOptions::two_phase);
//   stack      framework-style: per read the n sources are first copied into a contiguous (n, T, d)
//              buffer, then one call each for the key norm (keys materialised), the scores, the
//              softmax and the weighted sum over the copy (Strategy::stack of the cost model).
// All three keep the history the engine's way (Full: v_i in arena slot i; Block: the open
// block's partial sum in its slot, v_r added in place, the next block zeroed when it starts) and
// give the same read outputs up to rounding.
enum class DepthImplementation { one_shot, two_phase, stack };
inline constexpr EnumNames<DepthImplementation, 3> kDepthImplementationNames{
    {{DepthImplementation::one_shot, "one_shot"},
     {DepthImplementation::two_phase, "two_phase"},
     {DepthImplementation::stack, "stack"}}};
std::string to_string(DepthImplementation implementation);

// The depth reads of one forward pass of the fast engine in f32 (every read r = 0 .. L of a Full
// or Block layout, T tokens, width d) without the sublayers: the sublayer outputs are fixed
// pseudo-random data (Full: prefilled in their slots; Block: one (T, d) output added into the
// open partial sum after each read), so what is timed is the mechanism alone. Buffers are
// allocated once, in the constructor. `full_schedule_block`: the two-phase group size of Full
// (0: the engine's default, round(sqrt(L))); Block groups are its blocks.
class DepthPass {
 public:
  DepthPass(const DepthLayout& layout, int T, int d, int threads, int full_schedule_block = 0);
  ~DepthPass();
  DepthPass(const DepthPass&) = delete;
  DepthPass& operator=(const DepthPass&) = delete;

  // Runs every read once.
  void run(DepthImplementation implementation);
  // Thread-pool calls (kernel launches) of the last run, and the single-threaded history updates
  // (Block: one partial-sum add per sublayer, one zero fill per later block).
  std::int64_t calls() const;
  std::int64_t history_updates() const;
  // With keep_outputs, run() also copies every read's output h: (L + 1) x T x d, read-major.
  void keep_outputs(bool keep);
  const std::vector<float>& read_outputs() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// One warm-up run, then at least `repeat` timed ones and more while the timed runs took less than
// `min_seconds` in all (at most 1000): the best, in seconds.
double time_depth_pass(DepthPass& pass, DepthImplementation implementation, int repeat,
                       const Progress& progress = {}, double min_seconds = 0);
// The standard residual's L adds h += f(h) over (T, d), as the fast engine runs them (one
// single-threaded vector add per sublayer): the best as time_depth_pass takes it, in seconds.
double time_standard_residual(int T, int d, int L, int repeat, const Progress& progress = {},
                              double min_seconds = 0);

}  // namespace attnres

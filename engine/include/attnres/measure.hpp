// Measurements behind `attnres bench forward` (docs/engines.md): whole forward passes timed after
// a warm-up, the depth read alone in bytes/s, and the machine's stream (triad) bandwidth to
// compare it with. Timing is measured and reported, never asserted in tests.
#pragma once

#include <cstddef>
#include <vector>

#include "attnres/cancel.hpp"
#include "attnres/engine.hpp"

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

}  // namespace attnres

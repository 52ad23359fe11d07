#include "attnres/measure.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <type_traits>

#include "attnres/error.hpp"
#include "attnres/kernels.hpp"
#include "cpu/matmul.hpp"
#include "cpu/thread_pool.hpp"

namespace attnres {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

std::vector<int> benchmark_tokens(int count, int vocab, int seed) {
  std::vector<int> tokens;
  tokens.reserve(static_cast<std::size_t>(count));
  for (int t = 0; t < count; ++t) {
    const std::uint64_t x = 1103515245ull * static_cast<std::uint64_t>(seed + t) + 12345ull;
    tokens.push_back(static_cast<int>(x % 2147483648ull % static_cast<std::uint64_t>(vocab)));
  }
  return tokens;
}

template <typename Scalar>
ForwardTiming time_forward(ForwardEngine<Scalar>& engine, const std::vector<int>& tokens,
                           const ForwardOptions& options, int repeat, const Progress& progress) {
  ForwardTiming timing;
  const auto total = static_cast<std::size_t>(repeat) + 1;
  // Every pass, the warm-up and the timed ones, checks `progress` inside (before every sublayer
  // and every 32 key tiles of the attention), so a pass over a long sequence stops within a
  // fraction of a second; the check is one call of a callback, nothing on the timed path's scale.
  std::size_t pass = 0;
  ForwardOptions pass_options = options;
  if (progress) {
    pass_options.progress = [&progress, &pass, total](std::size_t, std::size_t) {
      return progress(pass, total);
    };
  }
  report_progress(progress, 0, total, "benchmark");
  engine.forward(tokens, pass_options);  // warm-up: workspaces, caches, page faults
  for (int k = 0; k < repeat; ++k) {
    pass = static_cast<std::size_t>(k) + 1;
    report_progress(progress, pass, total, "benchmark");
    const auto start = Clock::now();
    engine.forward(tokens, pass_options);
    timing.seconds.push_back(since(start));
  }
  std::vector<double> sorted = timing.seconds;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  timing.seconds_per_forward = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  timing.tokens_per_second = static_cast<double>(tokens.size()) / timing.seconds_per_forward;
  return timing;
}

template ForwardTiming time_forward(ForwardEngine<float>&, const std::vector<int>&,
                                    const ForwardOptions&, int, const Progress&);
template ForwardTiming time_forward(ForwardEngine<double>&, const std::vector<int>&,
                                    const ForwardOptions&, int, const Progress&);

Bandwidth measure_depth_read(int sources, int T, int d, int threads, int repeat) {
  const auto plane = static_cast<std::size_t>(T) * static_cast<std::size_t>(d);
  std::vector<float> arena(static_cast<std::size_t>(sources) * plane), h(plane), o(plane),
      m(static_cast<std::size_t>(T)), l(static_cast<std::size_t>(T)),
      scores(static_cast<std::size_t>(T) * static_cast<std::size_t>(sources));
  std::vector<float> query(static_cast<std::size_t>(d));
  for (std::size_t i = 0; i < arena.size(); ++i)
    arena[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
  for (int c = 0; c < d; ++c)
    query[static_cast<std::size_t>(c)] = 0.01f * static_cast<float>(c % 7);
  engine::ThreadPool pool(threads);
  Bandwidth result;
  result.bytes =
      static_cast<double>((static_cast<std::size_t>(sources) + 1) * plane * sizeof(float));
  result.seconds = 1e30;
  for (int k = 0; k < repeat + 1; ++k) {
    const auto start = Clock::now();
    pool.parallel_for(static_cast<std::size_t>(T), [&](std::size_t b, std::size_t e, int) {
      cpu::depth_phase_one(arena.data(), static_cast<long>(plane), sources, T, d, query.data(), 1,
                           1e-6f, m.data(), l.data(), o.data(), scores.data(), static_cast<int>(b),
                           static_cast<int>(e));
      cpu::depth_finish(o.data(), l.data(), d, h.data(), static_cast<int>(b), static_cast<int>(e));
    });
    if (k > 0) result.seconds = std::min(result.seconds, since(start));  // the first is a warm-up
  }
  return result;
}

Bandwidth measure_stream_triad(int threads, std::size_t elements, int repeat) {
  std::vector<float> a(elements, 0.0f), b(elements, 1.0f), c(elements, 2.0f);
  engine::ThreadPool pool(threads);
  Bandwidth result;
  result.bytes = 3.0 * static_cast<double>(elements) * sizeof(float);
  result.seconds = 1e30;
  const float scalar = 3.0f;
  for (int k = 0; k < repeat; ++k) {
    const auto start = Clock::now();
    pool.parallel_for(elements, [&](std::size_t begin, std::size_t end, int) {
      for (std::size_t i = begin; i < end; ++i) a[i] = b[i] + scalar * c[i];
    });
    result.seconds = std::min(result.seconds, since(start));
  }
  return result;
}

namespace {

template <typename Scalar>
GemmTiming time_gemm(Precision precision, int m, int n, int k, int threads, int repeat,
                     const Progress& progress) {
  GemmTiming timing;
  timing.precision = precision;
  timing.m = m;
  timing.n = n;
  timing.k = k;
  const auto mz = static_cast<std::size_t>(m), nz = static_cast<std::size_t>(n),
             kz = static_cast<std::size_t>(k);
  std::vector<Scalar> A(mz * kz), B(kz * nz), C(mz * nz);
  for (std::size_t i = 0; i < A.size(); ++i)
    A[i] = static_cast<Scalar>((i * 2654435761u) % 1000) * Scalar(1e-3) - Scalar(0.5);
  for (std::size_t i = 0; i < B.size(); ++i)
    B[i] = static_cast<Scalar>((i * 40503u) % 1000) * Scalar(1e-3) - Scalar(0.5);
  const bool bf16 = precision == Precision::bf16;
  std::vector<engine::Bf16> B16;
  if constexpr (std::is_same_v<Scalar, float>) {
    if (bf16) {
      B16.resize(B.size());
      engine::to_bf16(B.data(), B16.data(), B.size());  // once, as the engine rounds its weights
    }
  }
  engine::ThreadPool pool(threads);
  std::vector<engine::Matmul> matmul;
  for (int w = 0; w < pool.size(); ++w) matmul.emplace_back(bf16);
  timing.seconds = 1e30;
  for (int r = 0; r <= repeat; ++r) {
    report_progress(progress, static_cast<std::size_t>(r), static_cast<std::size_t>(repeat) + 1,
                    "measuring");
    const auto start = Clock::now();
    pool.parallel_for(mz, [&](std::size_t begin, std::size_t end, int worker) {
      const auto rows = static_cast<Eigen::Index>(end - begin);
      matmul[static_cast<std::size_t>(worker)](
          C.data() + begin * nz, n, engine::plain(A.data() + begin * kz, rows, k),
          engine::plain(B.data(), k, n, n, B16.empty() ? nullptr : B16.data()));
    });
    if (r > 0) timing.seconds = std::min(timing.seconds, since(start));  // the first: a warm-up
  }
  return timing;
}

}  // namespace

GemmTiming measure_gemm(Precision precision, int m, int n, int k, int threads, int repeat,
                        const Progress& progress) {
  if (m < 1 || n < 1 || k < 1) throw Error("measure_gemm: the shape must be positive");
  return computes_in_f64(precision)
             ? time_gemm<double>(precision, m, n, k, threads, repeat, progress)
             : time_gemm<float>(precision, m, n, k, threads, repeat, progress);
}

double measure_call_floor(int threads, int calls, const Progress& progress) {
  constexpr int kSources = 2, kWidth = 64;
  const int T = 2 * threads;
  const auto plane = static_cast<std::size_t>(T) * kWidth;
  std::vector<float> arena(kSources * plane), h(plane), o(plane), m(static_cast<std::size_t>(T)),
      l(static_cast<std::size_t>(T)), scores(static_cast<std::size_t>(T) * kSources),
      query(kWidth, 0.01f);
  for (std::size_t i = 0; i < arena.size(); ++i)
    arena[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
  engine::ThreadPool pool(threads);
  std::vector<double> seconds;
  for (int call = 0; call <= calls; ++call) {
    if (call % 50 == 0)
      report_progress(progress, static_cast<std::size_t>(call), static_cast<std::size_t>(calls) + 1,
                      "measuring");
    const auto start = Clock::now();
    pool.parallel_for(static_cast<std::size_t>(T), [&](std::size_t b, std::size_t e, int) {
      cpu::depth_phase_one(arena.data(), static_cast<long>(plane), kSources, T, kWidth,
                           query.data(), 1, 1e-6f, m.data(), l.data(), o.data(), scores.data(),
                           static_cast<int>(b), static_cast<int>(e));
      cpu::depth_finish(o.data(), l.data(), kWidth, h.data(), static_cast<int>(b),
                        static_cast<int>(e));
    });
    if (call > 0) seconds.push_back(since(start));  // the first is a warm-up
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

std::size_t peak_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::size_t>(usage.ru_maxrss) * 1024;
}

}  // namespace attnres

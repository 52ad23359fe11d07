// The depth reads of a forward pass as the fast engine runs them, without the sublayers
// (measure.hpp, DepthPass): the one-shot and two-phase paths run FastForward::forward's own read
// (run_depth_read, engine/cpu/fast_forward.hpp) over the same arena layout and kernels; the
// stack-style path is the framework way of the cost model's Strategy::stack (docs/math.md §3.6).
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "attnres/error.hpp"
#include "attnres/forward_steps.hpp"
#include "attnres/measure.hpp"
#include "attnres/tensor.hpp"
#include "cpu/fast_forward.hpp"
#include "cpu/thread_pool.hpp"

namespace attnres {

std::string to_string(DepthImplementation implementation) {
  return enum_name(kDepthImplementationNames, implementation);
}

namespace {

using Clock = std::chrono::steady_clock;
using Vec = Eigen::Map<Eigen::VectorXf>;
using ConstVec = Eigen::Map<const Eigen::VectorXf>;

constexpr float kKeyEps = 1e-6f;

// Deterministic data in [-0.5, 0.5).
void fill_pseudo_random(float* data, std::size_t count, std::size_t seed) {
  for (std::size_t i = 0; i < count; ++i)
    data[i] = static_cast<float>(((i + seed) * 2654435761u) % 1000) * 1e-3f - 0.5f;
}

}  // namespace

struct DepthPass::State {
  DepthLayout layout;
  int T = 0, d = 0;
  std::size_t plane = 0, stride = 0;
  engine::ThreadPool pool;
  std::vector<int> group_of;
  std::vector<float> arena, h, v, queries;  // (slots, T, d), (T, d), (T, d), (L + 1, d)
  std::vector<float> m, l, o, history_scores, extra_scores;
  std::vector<float> stacked, keys, z;  // stack-style: (n, T, d), (n, T, d), (n, T)
  bool keep = false;
  std::vector<float> outputs;
  std::int64_t calls = 0, updates = 0;

  State(const DepthLayout& depth_layout, int tokens, int width, int threads, int schedule_block)
      : layout(depth_layout), T(tokens), d(width), pool(threads) {
    if (layout.mode != ResidualMode::full && layout.mode != ResidualMode::block)
      throw Error("a depth pass needs a Full or Block layout");
    if (T < 1 || d < 1) throw Error("a depth pass needs T >= 1 and d >= 1");
    const int L = layout.sublayers;
    ForwardOptions options;
    options.full_schedule_block = schedule_block;
    group_of = schedule_groups(layout, options);
    plane = static_cast<std::size_t>(T) * static_cast<std::size_t>(d);
    stride =
        engine::arena_slot_stride<float>(static_cast<std::size_t>(T), static_cast<std::size_t>(d));
    const int slots = layout.mode == ResidualMode::full ? L + 1 : layout.blocks + 1;
    std::size_t n_max = 1, q_max = 1;
    for (const auto& sources : layout.reads) n_max = std::max(n_max, sources.size());
    for (int r = 0; r <= L;) {
      int last = r;
      while (last < L &&
             group_of[static_cast<std::size_t>(last + 1)] == group_of[static_cast<std::size_t>(r)])
        ++last;
      q_max = std::max(q_max, static_cast<std::size_t>(last - r + 1));
      r = last + 1;
    }
    arena.assign(static_cast<std::size_t>(slots) * stride, 0.0f);
    // Full: every output in its slot; Block: the embedding (partial sums start from zero).
    const int filled = layout.mode == ResidualMode::full ? slots : 1;
    for (int s = 0; s < filled; ++s)
      fill_pseudo_random(arena.data() + static_cast<std::size_t>(s) * stride, plane,
                         static_cast<std::size_t>(s) * 7919);
    h.assign(plane, 0.0f);
    v.resize(plane);
    fill_pseudo_random(v.data(), plane, 104729);
    queries.resize(static_cast<std::size_t>(L + 1) * static_cast<std::size_t>(d));
    for (std::size_t i = 0; i < queries.size(); ++i)
      queries[i] = 0.02f * static_cast<float>(static_cast<int>(i % 11) - 5);
    const auto Tz = static_cast<std::size_t>(T);
    m.resize(q_max * Tz);
    l.resize(q_max * Tz);
    o.resize(q_max * plane);
    history_scores.resize(q_max * Tz * n_max);
    extra_scores.resize(n_max * Tz);
  }

  float* slot_data(int slot) { return arena.data() + static_cast<std::size_t>(slot) * stride; }
  const float* query(int r) const { return queries.data() + static_cast<std::size_t>(r) * d; }

  // After read r: the sublayer's output joins the history (FastForward::forward, "where its
  // output goes"): Full's sublayer writes its slot itself (prefilled here), Block adds v to the
  // open partial sum and zeroes the next block when it starts.
  void after_read(int r) {
    if (layout.mode != ResidualMode::block) return;
    const int sublayer = r + 1;
    float* partial = slot_data(layout.block_of_sublayer(sublayer));
    Vec(partial, static_cast<Eigen::Index>(plane)) +=
        ConstVec(v.data(), static_cast<Eigen::Index>(plane));
    ++updates;
    if (sublayer < layout.sublayers && sublayer % layout.block_size == 0) {
      float* next = slot_data(layout.block_of_sublayer(sublayer + 1));
      std::fill(next, next + plane, 0.0f);
      ++updates;
    }
  }

  void start_pass() {
    calls = updates = 0;
    if (keep) outputs.resize(static_cast<std::size_t>(layout.sublayers + 1) * plane);
    if (layout.mode == ResidualMode::block) std::fill(slot_data(1), slot_data(1) + plane, 0.0f);
  }

  void keep_output(int r) {
    if (keep) std::copy(h.begin(), h.end(), outputs.begin() + static_cast<long>(r * plane));
  }

  // The engine's loop (fast_forward.cpp, run_depth_read), the trace left out.
  void run_arena(bool two_phase) {
    engine::DepthReadGroup group;
    const engine::DepthReadBuffers<float> buffers{
        arena.data(), stride,   queries.data(),        m.data(),
        l.data(),     o.data(), history_scores.data(), extra_scores.data()};
    for (int r = 0; r <= layout.sublayers; ++r) {
      calls += engine::run_depth_read(pool, layout, group_of, two_phase, r, T, d, kKeyEps, buffers,
                                      group, h.data())
                   .calls;
      keep_output(r);
      if (r < layout.sublayers) after_read(r);
    }
  }

  // Framework style: stack the sources, then one op (one call) per step over the copy.
  void run_stack() {
    const int L = layout.sublayers;
    const auto Tz = static_cast<std::size_t>(T), dz = static_cast<std::size_t>(d);
    std::size_t n_max = 1;
    for (const auto& sources : layout.reads) n_max = std::max(n_max, sources.size());
    stacked.resize(n_max * plane);
    keys.resize(n_max * plane);
    z.resize(n_max * Tz);
    for (int r = 0; r <= L; ++r) {
      const auto& sources = layout.reads[static_cast<std::size_t>(r)];
      const std::size_t n = sources.size();
      // torch.stack(sources): (n, T, d)
      pool.parallel_for(Tz, [&](std::size_t b, std::size_t e, int) {
        for (std::size_t i = 0; i < n; ++i) {
          const float* from = slot_data(engine::arena_slot(sources[i]));
          std::copy(from + b * dz, from + e * dz, stacked.data() + i * plane + b * dz);
        }
      });
      // keys = v / rms(v) (the key norm's gain is folded into the effective query w * g)
      pool.parallel_for(Tz, [&](std::size_t b, std::size_t e, int) {
        for (std::size_t i = 0; i < n; ++i) {
          for (std::size_t t = b; t < e; ++t) {
            const float* row = stacked.data() + i * plane + t * dz;
            const float inverse = inverse_rms_of_row(row, d, kKeyEps);
            Vec(keys.data() + i * plane + t * dz, d) = ConstVec(row, d) * inverse;
          }
        }
      });
      // scores z = keys . w
      pool.parallel_for(Tz, [&](std::size_t b, std::size_t e, int) {
        const ConstVec w(query(r), d);
        for (std::size_t i = 0; i < n; ++i) {
          for (std::size_t t = b; t < e; ++t)
            z[i * Tz + t] = w.dot(ConstVec(keys.data() + i * plane + t * dz, d));
        }
      });
      // softmax over the sources, in place
      pool.parallel_for(Tz, [&](std::size_t b, std::size_t e, int) {
        for (std::size_t t = b; t < e; ++t) {
          float max = -std::numeric_limits<float>::infinity();
          for (std::size_t i = 0; i < n; ++i) max = std::max(max, z[i * Tz + t]);
          float sum = 0;
          for (std::size_t i = 0; i < n; ++i) {
            z[i * Tz + t] = std::exp(z[i * Tz + t] - max);
            sum += z[i * Tz + t];
          }
          for (std::size_t i = 0; i < n; ++i) z[i * Tz + t] /= sum;
        }
      });
      // h = sum_i alpha_i v_i over the stacked copy
      pool.parallel_for(Tz, [&](std::size_t b, std::size_t e, int) {
        for (std::size_t t = b; t < e; ++t) {
          Vec out(h.data() + t * dz, d);
          out.setZero();
          for (std::size_t i = 0; i < n; ++i)
            out += z[i * Tz + t] * ConstVec(stacked.data() + i * plane + t * dz, d);
        }
      });
      calls += 5;
      keep_output(r);
      if (r < L) after_read(r);
    }
  }
};

DepthPass::DepthPass(const DepthLayout& layout, int T, int d, int threads, int full_schedule_block)
    : state_(std::make_unique<State>(layout, T, d, threads, full_schedule_block)) {}

DepthPass::~DepthPass() = default;

void DepthPass::run(DepthImplementation implementation) {
  State& s = *state_;
  s.start_pass();
  switch (implementation) {
    case DepthImplementation::one_shot:
      s.run_arena(false);
      break;
    case DepthImplementation::two_phase:
      s.run_arena(true);
      break;
    case DepthImplementation::stack:
      s.run_stack();
      break;
  }
}

std::int64_t DepthPass::calls() const {
  return state_->calls;
}

std::int64_t DepthPass::history_updates() const {
  return state_->updates;
}

void DepthPass::keep_outputs(bool keep) {
  state_->keep = keep;
}

const std::vector<float>& DepthPass::read_outputs() const {
  return state_->outputs;
}

namespace {

// One warm-up call of `once`, then timed ones until `repeat` and `min_seconds` are both met.
template <typename Once>
double best_of(int repeat, double min_seconds, const Progress& progress, Once&& once) {
  constexpr int kMaxRuns = 1000;
  double best = std::numeric_limits<double>::infinity(), timed = 0;
  for (int k = 0; k <= kMaxRuns && (k <= repeat || timed < min_seconds); ++k) {
    report_progress(progress, static_cast<std::size_t>(std::min(k, repeat)),
                    static_cast<std::size_t>(repeat) + 1, "measuring");
    const auto start = Clock::now();
    once();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (k > 0) {  // the first is a warm-up
      best = std::min(best, seconds);
      timed += seconds;
    }
  }
  return best;
}

}  // namespace

double time_depth_pass(DepthPass& pass, DepthImplementation implementation, int repeat,
                       const Progress& progress, double min_seconds) {
  return best_of(repeat, min_seconds, progress, [&] { pass.run(implementation); });
}

double time_standard_residual(int T, int d, int L, int repeat, const Progress& progress,
                              double min_seconds) {
  const auto plane = static_cast<Eigen::Index>(T) * d;
  std::vector<float> h(static_cast<std::size_t>(plane)), v(static_cast<std::size_t>(plane));
  fill_pseudo_random(h.data(), h.size(), 1);
  fill_pseudo_random(v.data(), v.size(), 2);
  return best_of(repeat, min_seconds, progress, [&] {
    for (int r = 0; r < L; ++r) Vec(h.data(), plane) += 1e-3f * ConstVec(v.data(), plane);
  });
}

}  // namespace attnres

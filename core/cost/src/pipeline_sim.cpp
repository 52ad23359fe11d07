#include "attnres/pipeline_sim.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnres/assert.hpp"
#include "attnres/error.hpp"
#include "attnres/time_model.hpp"

namespace attnres {

std::string to_string(PipelineSchedule schedule) {
  return enum_name(kPipelineScheduleNames, schedule);
}

PipelineSchedule parse_pipeline_schedule(const std::string& text, const std::string& where) {
  return parse_enum(kPipelineScheduleNames, text, where, "unknown schedule");
}

double closed_form_bubble(PipelineSchedule schedule, int P, int V, int m) {
  if (schedule == PipelineSchedule::one_f_one_b) return static_cast<double>(P - 1) / m;
  if (m >= P) return static_cast<double>(P - 1) / (static_cast<double>(V) * m);
  return static_cast<double>((P - m) * V + m - 1) / (static_cast<double>(V) * m);
}

namespace {

struct Op {
  int chunk, microbatch;
  bool backward;
};

// Megatron-LM's per-rank orders.
std::vector<Op> rank_order(const PipelineSimInputs& in, int rank) {
  const int P = in.ranks, V = in.virtual_stages, m = in.microbatches;
  std::vector<Op> forwards, backwards;
  for (int group = 0; group * P < m; ++group) {
    const int first = group * P, last = std::min(m, first + P);
    for (int v = 0; v < V; ++v) {
      for (int j = first; j < last; ++j) forwards.push_back({v * P + rank, j, false});
    }
    for (int v = V - 1; v >= 0; --v) {
      for (int j = first; j < last; ++j) backwards.push_back({v * P + rank, j, true});
    }
  }
  const int total = static_cast<int>(forwards.size());
  int warmup = in.schedule == PipelineSchedule::one_f_one_b ? P - rank - 1
                                                            : (P - rank - 1) * 2 + (V - 1) * P;
  warmup = std::min(warmup, total);
  std::vector<Op> order(forwards.begin(), forwards.begin() + warmup);
  for (int i = 0; i < total - warmup; ++i) {
    order.push_back(forwards[static_cast<std::size_t>(warmup + i)]);
    order.push_back(backwards[static_cast<std::size_t>(i)]);
  }
  for (int i = total - warmup; i < total; ++i)
    order.push_back(backwards[static_cast<std::size_t>(i)]);
  return order;
}

void check(const PipelineSimInputs& in) {
  const int P = in.ranks, V = in.virtual_stages, m = in.microbatches;
  if (P < 1) throw Error("pipeline: ranks P must be >= 1, got " + std::to_string(P));
  if (V < 1) throw Error("pipeline: virtual stages V must be >= 1, got " + std::to_string(V));
  if (m < 1) throw Error("pipeline: micro-batches m must be >= 1, got " + std::to_string(m));
  if (in.schedule == PipelineSchedule::one_f_one_b && V != 1) {
    throw Error(
        "pipeline: the 1f1b schedule has one stage per rank (V = 1); use the interleaved "
        "schedule for V = " +
        std::to_string(V));
  }
  if (in.schedule == PipelineSchedule::interleaved && V > 1 && m > P && m % P != 0) {
    throw Error(
        "pipeline: the interleaved schedule (Megatron-LM's order) needs the micro-batches m to be "
        "a "
        "multiple of P = " +
        std::to_string(P) + " (or fewer than P); got m = " + std::to_string(m));
  }
  const std::size_t C = static_cast<std::size_t>(P) * static_cast<std::size_t>(V);
  if (in.forward_seconds.size() != C || in.backward_seconds.size() != C ||
      in.activation_bytes.size() != C || in.history_bytes.size() != C ||
      in.boundary_bytes.size() + 1 != C) {
    throw Error("pipeline: per-chunk inputs must have C = P·V entries (C - 1 boundaries)");
  }
  for (std::size_t c = 0; c < C; ++c) {
    if (!(in.forward_seconds[c] >= 0) || !(in.backward_seconds[c] >= 0)) {
      throw Error("pipeline: chunk times must be non-negative");
    }
  }
  if (!in.ideal_links && P > 1 && !(in.link_bandwidth > 0)) {
    throw Error("pipeline: link bandwidth must be > 0 (or use ideal links)");
  }
}

}  // namespace

PipelineSimResult simulate_pipeline(const PipelineSimInputs& in) {
  check(in);
  const int P = in.ranks, m = in.microbatches, C = P * in.virtual_stages;
  const double unknown = -1.0;
  auto index = [C](int j, int c) {
    return static_cast<std::size_t>(j) * static_cast<std::size_t>(C) + static_cast<std::size_t>(c);
  };
  std::vector<double> forward_arrival(static_cast<std::size_t>(m) * C, unknown);
  std::vector<double> backward_arrival(static_cast<std::size_t>(m) * C, unknown);
  std::vector<double> forward_end(static_cast<std::size_t>(m) * C, unknown);
  for (int j = 0; j < m; ++j) forward_arrival[index(j, 0)] = 0.0;

  std::vector<std::vector<Op>> orders(static_cast<std::size_t>(P));
  for (int r = 0; r < P; ++r) {
    orders[static_cast<std::size_t>(r)] = rank_order(in, r);
    // Every op of the rank's V chunks is in its order exactly once: a forward and a backward of
    // each of the m micro-batches per chunk, each on the rank that owns the chunk.
    const auto& order = orders[static_cast<std::size_t>(r)];
    const std::size_t ops = static_cast<std::size_t>(2) *
                            static_cast<std::size_t>(in.virtual_stages) *
                            static_cast<std::size_t>(m);
    ATTNRES_ASSERT(order.size() == ops,
                   "rank " + std::to_string(r) + "'s order holds its 2·V·m ops");
    std::vector<bool> seen(ops, false);
    for (const Op& op : order) {
      ATTNRES_ASSERT(op.chunk % P == r && op.microbatch >= 0 && op.microbatch < m,
                     "an op of this rank");
      const std::size_t at = (static_cast<std::size_t>(op.chunk / P) * static_cast<std::size_t>(m) +
                              static_cast<std::size_t>(op.microbatch)) *
                                 2 +
                             (op.backward ? 1 : 0);
      ATTNRES_ASSERT(!seen[at], "no op twice in rank " + std::to_string(r) + "'s order");
      seen[at] = true;
    }
  }
  std::vector<std::size_t> next(static_cast<std::size_t>(P), 0);
  std::vector<double> rank_free(static_cast<std::size_t>(P), 0.0);
  std::vector<double> link_free(static_cast<std::size_t>(P) * static_cast<std::size_t>(P), 0.0);
  std::vector<double> live(static_cast<std::size_t>(P), 0.0),
      live_activation(static_cast<std::size_t>(P), 0.0);

  PipelineSimResult result;
  result.peak_memory_bytes.assign(static_cast<std::size_t>(P), 0.0);
  result.peak_activation_bytes.assign(static_cast<std::size_t>(P), 0.0);
  if (in.record_timeline) result.memory.assign(static_cast<std::size_t>(P), {{0.0, 0.0}});

  auto send = [&](int from_rank, int to_rank, int from_chunk, int to_chunk, int j, bool backward,
                  double ready, double bytes) {
    if (from_rank == to_rank) return ready;
    double& link = link_free[static_cast<std::size_t>(from_rank) * static_cast<std::size_t>(P) +
                             static_cast<std::size_t>(to_rank)];
    const double start = std::max(ready, link);
    // The time model's one transfer formula; the link efficiency is already in link_bandwidth.
    const double duration =
        in.ideal_links ? 0.0 : transfer_seconds(bytes, in.link_bandwidth, in.link_latency, 1.0);
    link = start + duration;
    result.transferred_bytes += bytes;
    if (in.record_timeline) {
      result.transfers.push_back(
          {from_rank, to_rank, from_chunk, to_chunk, j, backward, start, start + duration, bytes});
    }
    if (!in.overlap)
      rank_free[static_cast<std::size_t>(from_rank)] =
          std::max(rank_free[static_cast<std::size_t>(from_rank)], start + duration);
    return start + duration;
  };
  auto track = [&](int rank, double time, double delta, double activation_delta) {
    const auto r = static_cast<std::size_t>(rank);
    live[r] += delta;
    live_activation[r] += activation_delta;
    result.peak_memory_bytes[r] = std::max(result.peak_memory_bytes[r], live[r]);
    result.peak_activation_bytes[r] = std::max(result.peak_activation_bytes[r], live_activation[r]);
    if (in.record_timeline) result.memory[r].push_back({time, live[r]});
  };

  std::size_t remaining = 0;
  for (const auto& order : orders) remaining += order.size();
  const std::size_t total_ops = remaining;
  while (remaining > 0) {
    report_progress(in.progress, total_ops - remaining, total_ops, "pipeline simulation");
    bool progressed = false;
    for (int r = 0; r < P; ++r) {
      auto& order = orders[static_cast<std::size_t>(r)];
      auto& position = next[static_cast<std::size_t>(r)];
      while (position < order.size()) {
        const Op op = order[position];
        const std::size_t slot = index(op.microbatch, op.chunk);
        const double ready = op.backward
                                 ? (op.chunk == C - 1 ? forward_end[slot] : backward_arrival[slot])
                                 : forward_arrival[slot];
        if (ready == unknown) break;
        const auto c = static_cast<std::size_t>(op.chunk);
        const double start = std::max(rank_free[static_cast<std::size_t>(r)], ready);
        // Dependencies: a forward after the previous chunk's forward, a backward after this
        // chunk's forward (and the next chunk's backward).
        ATTNRES_ASSERT(
            op.backward ? forward_end[slot] != unknown && start >= forward_end[slot] : true,
            "a backward starts after its forward");
        const double end = start + (op.backward ? in.backward_seconds[c] : in.forward_seconds[c]);
        rank_free[static_cast<std::size_t>(r)] = end;
        if (in.record_timeline)
          result.ops.push_back({r, op.chunk, op.microbatch, op.backward, start, end});
        const double held = in.activation_bytes[c] + in.history_bytes[c];
        if (!op.backward) {
          forward_end[slot] = end;
          track(r, start, held, in.activation_bytes[c]);
          if (op.chunk + 1 < C) {
            forward_arrival[index(op.microbatch, op.chunk + 1)] =
                send(r, (op.chunk + 1) % P, op.chunk, op.chunk + 1, op.microbatch, false, end,
                     in.boundary_bytes[c]);
          }
        } else {
          track(r, end, -held, -in.activation_bytes[c]);
          if (op.chunk > 0) {
            backward_arrival[index(op.microbatch, op.chunk - 1)] =
                send(r, (op.chunk - 1) % P, op.chunk, op.chunk - 1, op.microbatch, true, end,
                     in.boundary_bytes[c - 1]);
          }
        }
        result.iteration_seconds =
            std::max(result.iteration_seconds, rank_free[static_cast<std::size_t>(r)]);
        ++position;
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) {
      throw Error("pipeline: the " + to_string(in.schedule) +
                  " schedule deadlocked with P = " + std::to_string(P) +
                  ", V = " + std::to_string(in.virtual_stages) + ", m = " + std::to_string(m));
    }
  }
  // Every backward released what its forward held: each rank ends with nothing live.
  for (int r = 0; r < P; ++r) {
    const double held = live[static_cast<std::size_t>(r)];
    ATTNRES_ASSERT(std::abs(held) <=
                       1e-9 * std::max(1.0, result.peak_memory_bytes[static_cast<std::size_t>(r)]),
                   "rank " + std::to_string(r) + " ends with no activations held");
  }
  for (int r = 0; r < P; ++r) {
    double busy = 0;
    for (int c = r; c < C; c += P)
      busy += in.forward_seconds[static_cast<std::size_t>(c)] +
              in.backward_seconds[static_cast<std::size_t>(c)];
    result.ideal_seconds = std::max(result.ideal_seconds, busy * m);
  }
  result.bubble_fraction =
      result.ideal_seconds > 0 ? result.iteration_seconds / result.ideal_seconds - 1.0 : 0.0;
  return result;
}

}  // namespace attnres

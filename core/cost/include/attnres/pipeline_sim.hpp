// A discrete-event simulator of pipeline-parallel training schedules (docs/math.md §3.4): 1F1B and
// interleaved 1F1B (Megatron-LM's orders) with P ranks, V virtual stages and m micro-batches.
// It places every forward/backward chunk and every point-to-point transfer on a per-rank
// timeline, and tracks each rank's live memory (activations + received AttnRes history).
//
// Chunk c (0..C-1, C = P·V) runs on rank c mod P. Forward of micro-batch j on chunk c needs the
// forward of chunk c-1 and its transfer; backward on chunk c needs the backward of chunk c+1 and
// its transfer (the last chunk's backward follows its own forward). Each rank executes its ops in
// the schedule's fixed order, as soon as their inputs have arrived. Transfers on one directed
// link go one at a time; with overlap off, the sender waits for its send to finish.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"
#include "attnres/enum_names.hpp"

namespace attnres {

enum class PipelineSchedule { one_f_one_b, interleaved };
inline constexpr EnumNames<PipelineSchedule, 2> kPipelineScheduleNames{
    {{PipelineSchedule::one_f_one_b, "1f1b"}, {PipelineSchedule::interleaved, "interleaved"}}};
std::string to_string(PipelineSchedule schedule);
PipelineSchedule parse_pipeline_schedule(const std::string& text, const std::string& where);

struct PipelineSimInputs {
  int ranks = 1;           // P
  int virtual_stages = 1;  // V
  int microbatches = 1;    // m
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  std::vector<double> forward_seconds;   // (C) per chunk
  std::vector<double> backward_seconds;  // (C) per chunk
  std::vector<double> boundary_bytes;    // (C-1) forward boundary c -> c+1; backward sends the same
  double link_bandwidth = 0;             // bytes/s per direction (efficiency already applied)
  double link_latency = 0;               // s per transfer
  bool ideal_links = false;              // transfers take no time
  bool overlap = true;                   // transfers overlap compute
  std::vector<double>
      activation_bytes;               // (C) held from a chunk's forward start to its backward end
  std::vector<double> history_bytes;  // (C) received AttnRes history, held likewise
  bool record_timeline = true;
  // (ops placed, ops in all) now and then; returning false stops with attnres::Cancelled.
  Progress progress;
};

struct SimOp {
  int rank, chunk, microbatch;
  bool backward;
  double start, end;
};
struct SimTransfer {
  int from_rank, to_rank, from_chunk, to_chunk, microbatch;
  bool backward;
  double start, end, bytes;
};
struct MemoryPoint {
  double time;
  double bytes;
};

struct PipelineSimResult {
  double iteration_seconds = 0;
  double ideal_seconds = 0;                   // the busiest rank's compute time
  double bubble_fraction = 0;                 // (iteration - ideal) / ideal
  double transferred_bytes = 0;               // all transfers, both directions
  std::vector<double> peak_memory_bytes;      // (P)
  std::vector<double> peak_activation_bytes;  // (P), activations only
  std::vector<SimOp> ops;                     // when record_timeline
  std::vector<SimTransfer> transfers;
  std::vector<std::vector<MemoryPoint>> memory;  // (P) step function of live bytes
};

// Throws attnres::Error on impossible inputs (sizes, V > 1 with 1F1B, interleaved with m > P not
// a multiple of P as Megatron-LM requires, mismatched vectors, zero bandwidth without ideal links)
// or a schedule that deadlocks (not seen for any permitted setting).
PipelineSimResult simulate_pipeline(const PipelineSimInputs& inputs);

// The simulation places a forward and a backward of every micro-batch on every chunk (m x C
// pairs, C = P·V) with their transfers and memory steps: about kPipelineBytesPerPair bytes each
// (measured: 1.64 GB peak for 2,000,000 pairs with the timeline of `attnres pipeline --format
// table`, about 810 bytes a pair). The bound keeps one run under about 800 MB.
inline constexpr std::int64_t kMaxPipelinePairs = 1'000'000;
inline constexpr std::int64_t kPipelineBytesPerPair = 800;

// Closed forms (with equal chunk times and free transfers): 1F1B (P-1)/m; interleaved
// (P-1)/(V·m) when m >= P is a multiple of P, and ((P-m)·V + m - 1)/(V·m) when m < P (the
// first micro-batch must cross all C chunks).
double closed_form_bubble(PipelineSchedule schedule, int ranks, int virtual_stages,
                          int microbatches);

}  // namespace attnres

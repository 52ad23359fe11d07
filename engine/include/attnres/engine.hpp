// The forward engines behind one interface (docs/engines.md):
//   reference  core/model/src/forward.cpp: readable, one Eigen expression per formula; the oracle
//   fast       engine/cpu/: fused weights, a preallocated history arena, two-phase depth reads
//              through the kernels/ interface, causal attention that skips the masked half,
//              threads (deterministic for a given count); f32 and f64
//   cuda       engine/cuda/: the whole forward on a GPU (cuBLAS GEMMs, the fused depth-read
//              kernel, an attention kernel); f32
// Every engine returns the same ForwardResult: logits, the final hidden state and the same trace
// (alpha of every read, RMS by depth, block norms, and, when asked, the mixing matrix and ranks).
//
//   ForwardEngine<float> engine(model, {.engine = EngineKind::fast, .threads = 2});
//   ForwardResult<float> result = engine.forward(tokens, options);  // reusable across calls
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "attnres/enum_names.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"

namespace attnres {

enum class EngineKind { fast, reference };
inline constexpr EnumNames<EngineKind, 2> kEngineKindNames{
    {{EngineKind::fast, "fast"}, {EngineKind::reference, "reference"}}};
enum class Device { cpu, cuda };
inline constexpr EnumNames<Device, 2> kDeviceNames{{{Device::cpu, "cpu"}, {Device::cuda, "cuda"}}};

std::string to_string(EngineKind engine);
std::string to_string(Device device);
// Throw attnres::Error naming `where` for unknown names.
EngineKind parse_engine(const std::string& text, const std::string& where);
Device parse_device(const std::string& text, const std::string& where);

// The most CPU threads an engine starts (--threads, train_state.json's threads). Far above the
// cores of any machine the engines are tuned for; a larger count is refused before any work
// rather than exhausting the process's threads or memory (docs/cli.md).
inline constexpr int kMaxThreads = 256;

// The arithmetic of a pass (docs/engines.md, "Precision"): f64 and f32 compute in that type;
// bf16 is mixed precision: f32 weights, activations, depth reads, norms, softmax and loss, with
// the matrix products' inputs rounded to bf16 and accumulated in f32 (oneDNN: AMX, AVX-512-BF16
// or an emulation, whichever the CPU has).
enum class Precision { f64, f32, bf16 };
inline constexpr EnumNames<Precision, 3> kPrecisionNames{
    {{Precision::f64, "f64"}, {Precision::f32, "f32"}, {Precision::bf16, "bf16"}}};
std::string to_string(Precision precision);
Precision parse_precision(const std::string& text, const std::string& where);

// What runs the CPU engine's matrix products here: oneDNN's instruction set ("avx512_core_amx",
// "avx512_core_bf16", "avx512_core", ...) and whether bf16 products run on native bf16 units
// (AMX or AVX-512-BF16) rather than an emulation.
struct MatrixUnits {
  std::string isa;
  bool native_bf16 = false;
};
MatrixUnits matrix_units();
// Training's default: bf16 where the CPU has native bf16 units, f32 elsewhere.
Precision default_training_precision();

struct EngineOptions {
  EngineKind engine = EngineKind::fast;
  Device device = Device::cpu;
  int threads = 0;    // CPU threads (fast engine); 0 = every core; at most kMaxThreads
  bool bf16 = false;  // bf16 products (Precision::bf16): the fast CPU engine in f32 only
};

// Throws attnres::Error unless bf16 products can run as asked: the fast engine on the CPU, with
// f32 weights (`f32`).
void check_bf16(const EngineOptions& options, bool f32);

// The Scalar type of a precision's weights and activations (bf16 keeps f32 ones), and the
// engine options that give it.
inline bool computes_in_f64(Precision precision) {
  return precision == Precision::f64;
}
inline EngineOptions with_precision(EngineOptions options, Precision precision) {
  options.bf16 = precision == Precision::bf16;
  return options;
}
// The precision of f32-weight work (training) on these options: bf16 or f32.
inline Precision f32_weights_precision(const EngineOptions& options) {
  return options.bf16 ? Precision::bf16 : Precision::f32;
}

// Throws attnres::Error naming `where` (a flag such as "--threads" or a file key) unless
// 0 <= threads <= kMaxThreads (0: every core).
void check_thread_count(int threads, const std::string& where);

// The cores of this machine (at least 1, at most kMaxThreads).
int default_thread_count();

// False, with the reason, when the CUDA engine cannot run here (not built, no device).
bool cuda_engine_available(std::string* why_not);

// A model prepared for repeated forward passes on one engine and device: fused weights, a thread
// pool and workspaces (fast), or weights on the device (cuda). Not thread-safe: one forward at a
// time per engine object.
template <typename Scalar>
class ForwardEngine {
 public:
  // Throws attnres::Error when the engine/device cannot run this model (the CUDA engine is f32
  // only; a missing device is a clear message, never a crash).
  ForwardEngine(const ModelWeights<Scalar>& model, const EngineOptions& options = {});
  ~ForwardEngine();
  ForwardEngine(const ForwardEngine&) = delete;
  ForwardEngine& operator=(const ForwardEngine&) = delete;

  // The same contract as attnres::forward (forward.hpp).
  ForwardResult<Scalar> forward(const std::vector<int>& tokens, const ForwardOptions& options = {});

  // Other weights on the same engine: the fast engine keeps its thread pool and prepares the new
  // weights (fused, rounded) as the constructor does; the CUDA engine uploads them. `model` must
  // outlive its use, as the constructor's.
  void set_model(const ModelWeights<Scalar>& model);

  const EngineOptions& options() const { return options_; }
  int threads() const;  // threads actually used (1 for reference and cuda)

  struct Impl;

 private:
  const ModelWeights<Scalar>* model_;
  EngineOptions options_;
  std::unique_ptr<Impl> impl_;
};

// Prepare and run once.
template <typename Scalar>
ForwardResult<Scalar> engine_forward(const ModelWeights<Scalar>& model,
                                     const std::vector<int>& tokens, const ForwardOptions& options,
                                     const EngineOptions& engine);

}  // namespace attnres

#include "attnres/engine.hpp"

#include <algorithm>
#include <thread>

#include "attnres/error.hpp"
#include "attnres/forward_steps.hpp"
#include "cpu/fast_forward.hpp"
#include "cpu/matmul.hpp"
#include "cuda/cuda_forward.hpp"
#include "src/fast_pass.hpp"

namespace attnres {

std::string to_string(EngineKind engine) {
  return enum_name(kEngineKindNames, engine);
}
std::string to_string(Device device) {
  return enum_name(kDeviceNames, device);
}

std::string to_string(Precision precision) {
  return enum_name(kPrecisionNames, precision);
}

Precision parse_precision(const std::string& text, const std::string& where) {
  return parse_enum(kPrecisionNames, text, where, "unknown precision");
}

MatrixUnits matrix_units() {
  return {engine::matmul_isa(), engine::native_bf16()};
}

Precision default_training_precision() {
  return engine::native_bf16() ? Precision::bf16 : Precision::f32;
}

EngineKind parse_engine(const std::string& text, const std::string& where) {
  return parse_enum(kEngineKindNames, text, where, "unknown engine");
}

Device parse_device(const std::string& text, const std::string& where) {
  return parse_enum(kDeviceNames, text, where, "unknown device");
}

void check_thread_count(int threads, const std::string& where) {
  if (threads < 0 || threads > kMaxThreads) {
    throw Error(where + " must be between 0 (every core) and " + std::to_string(kMaxThreads) +
                ", got " + std::to_string(threads));
  }
}

int default_thread_count() {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores == 0 ? 1 : static_cast<int>(std::min<unsigned>(cores, kMaxThreads));
}

bool cuda_engine_available(std::string* why_not) {
  return cuda_engine::available(why_not);
}

void check_bf16(const EngineOptions& options, bool f32) {
  if (!options.bf16) return;
  if (!f32) throw Error("--precision bf16 keeps f32 weights and activations; it has no f64 form");
  if (options.device == Device::cuda) {
    throw Error("--precision bf16 runs on the CPU; the CUDA engine computes in f32");
  }
  if (options.engine == EngineKind::reference) {
    throw Error(
        "--precision bf16 runs on the fast engine; the reference engine computes in f32 or f64 "
        "only (docs/engines.md)");
  }
}

template <typename Scalar>
struct ForwardEngine<Scalar>::Impl {
  std::unique_ptr<engine::FastForward<Scalar>> fast;
  std::unique_ptr<cuda_engine::CudaForward> cuda;
};

template <typename Scalar>
ForwardEngine<Scalar>::ForwardEngine(const ModelWeights<Scalar>& model,
                                     const EngineOptions& options)
    : model_(&model), options_(options), impl_(std::make_unique<Impl>()) {
  check_thread_count(options_.threads, "threads");
  if (options_.threads == 0) options_.threads = default_thread_count();
  check_bf16(options_, std::is_same_v<Scalar, float>);
  if (options_.device == Device::cuda) {
    if (options_.engine == EngineKind::reference) {
      throw Error("--device cuda runs the fast engine only; the reference engine runs on the CPU");
    }
    if constexpr (std::is_same_v<Scalar, float>) {
      impl_->cuda = std::make_unique<cuda_engine::CudaForward>(model);
    } else {
      throw Error("--device cuda computes in f32; use --precision f32");
    }
    return;
  }
  if (options_.engine == EngineKind::fast)
    impl_->fast =
        std::make_unique<engine::FastForward<Scalar>>(model, options_.threads, options_.bf16);
}

template <typename Scalar>
ForwardEngine<Scalar>::~ForwardEngine() = default;

template <typename Scalar>
void ForwardEngine<Scalar>::set_model(const ModelWeights<Scalar>& model) {
  model_ = &model;
  if (impl_->fast) impl_->fast->set_model(model);
  if constexpr (std::is_same_v<Scalar, float>) {
    if (impl_->cuda) impl_->cuda = std::make_unique<cuda_engine::CudaForward>(model);
  }
}

template <typename Scalar>
int ForwardEngine<Scalar>::threads() const {
  return impl_->fast ? impl_->fast->threads() : 1;
}

template <typename Scalar>
ForwardResult<Scalar> ForwardEngine<Scalar>::forward(const std::vector<int>& tokens,
                                                     const ForwardOptions& options) {
  // Masked reads and recorded sublayer inputs: the reference only.
  if (engine::reference_only(options)) {
    if (options_.bf16) {
      throw Error(
          "--precision bf16 runs on the fast engine, but masked reads and recorded sublayer "
          "inputs run on the reference engine (f32 or f64 only)");
    }
    return attnres::forward(*model_, tokens, options);
  }
  // The fast CPU engine runs every scheme; the CUDA engine refuses the schemes it does not run
  // with a message (engine::fast_engines_run; docs/schemes.md).
  if (impl_->fast) return impl_->fast->forward(tokens, options);
  if constexpr (std::is_same_v<Scalar, float>) {
    if (impl_->cuda) return impl_->cuda->forward(tokens, options);
  }
  return attnres::forward(*model_, tokens, options);
}

template <typename Scalar>
ForwardResult<Scalar> engine_forward(const ModelWeights<Scalar>& model,
                                     const std::vector<int>& tokens, const ForwardOptions& options,
                                     const EngineOptions& engine) {
  ForwardEngine<Scalar> prepared(model, engine);
  return prepared.forward(tokens, options);
}

template class ForwardEngine<float>;
template class ForwardEngine<double>;
template ForwardResult<float> engine_forward(const ModelWeights<float>&, const std::vector<int>&,
                                             const ForwardOptions&, const EngineOptions&);
template ForwardResult<double> engine_forward(const ModelWeights<double>&, const std::vector<int>&,
                                              const ForwardOptions&, const EngineOptions&);

}  // namespace attnres

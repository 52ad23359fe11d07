// Stand-in for the CUDA engine when the project is built without CUDA (no nvcc at build time,
// or ATTNRES_ENABLE_CUDA=OFF): it says why, and never crashes.
#include "attnres/error.hpp"
#include "cuda/cuda_forward.hpp"

namespace attnres::cuda_engine {

namespace {
constexpr const char* kWhy =
    "this build has no CUDA (nvcc was not found when it was configured, or "
    "ATTNRES_ENABLE_CUDA=OFF)";
}

bool available(std::string* why_not) {
  if (why_not) *why_not = kWhy;
  return false;
}

struct CudaForward::Impl {};

CudaForward::CudaForward(const ModelWeights<float>&) {
  throw Error(std::string("--device cuda: ") + kWhy);
}
CudaForward::~CudaForward() = default;
ForwardResult<float> CudaForward::forward(const std::vector<int>&, const ForwardOptions&) {
  throw Error(std::string("--device cuda: ") + kWhy);
}

}  // namespace attnres::cuda_engine

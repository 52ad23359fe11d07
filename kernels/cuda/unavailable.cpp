// Stand-in for the CUDA backend when the project is built without CUDA: it reports why it is
// unavailable, and the dispatcher never calls it.
#include "attnres/error.hpp"
#include "attnres/kernels.hpp"

namespace attnres::cuda {

bool available(std::string* why_not) {
  if (why_not) *why_not = "built without CUDA (configure with ATTNRES_ENABLE_CUDA=ON and nvcc)";
  return false;
}

void depth_attention_forward(float*, float*, const float*, const float*, const float*, float, int,
                             int, int) {
  throw Error("the CUDA backend was not built");
}

}  // namespace attnres::cuda

#include "attnres/error.hpp"
#include "attnres/kernels.hpp"

namespace attnres {

std::string to_string(KernelBackend backend) {
  return enum_name(kKernelBackendNames, backend);
}

bool kernel_backend_available(KernelBackend backend, std::string* why_not) {
  if (backend == KernelBackend::cpu) return true;
  return cuda::available(why_not);
}

void depth_attention_forward(KernelBackend backend, float* h, float* alpha, const float* sources,
                             const float* query, const float* gain, float eps, int n, int T,
                             int d) {
  if (n < 1 || T < 1 || d < 1) {
    throw Error("depth_attention_forward: sizes must be positive (n = " + std::to_string(n) +
                ", T = " + std::to_string(T) + ", d = " + std::to_string(d) + ")");
  }
  std::string why_not;
  if (!kernel_backend_available(backend, &why_not)) {
    throw Error("kernel backend " + to_string(backend) + " is unavailable: " + why_not);
  }
  if (backend == KernelBackend::cpu) {
    cpu::depth_attention_forward(h, alpha, sources, query, gain, eps, n, T, d);
  } else {
    cuda::depth_attention_forward(h, alpha, sources, query, gain, eps, n, T, d);
  }
}

}  // namespace attnres

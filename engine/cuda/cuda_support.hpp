// Host-side helpers of the CUDA engine (engine/cuda/): CUDA and cuBLAS status checks that throw
// attnres::Error (the engine object stays usable after one), a device allocation that only grows,
// and the grid of a grid-stride loop. Internal to the engine library; include from .cu files.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <string>

#include "attnres/error.hpp"
#include "cuda/cublas_loader.hpp"

namespace attnres::cuda_engine {

// ---------------------------------------------------------------------------------------------
// Errors

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear a non-sticky error so that the engine object stays usable
    throw Error(std::string("CUDA engine: ") + what + " failed: " + cudaGetErrorString(status));
  }
}

inline void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(std::string("CUDA engine: ") + what + " failed: " + cublas().status_string(status));
  }
}

inline std::string mib(std::size_t bytes) {
  return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB";
}

// A device allocation that only grows (contents are not kept when it does).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void reserve(std::size_t bytes, const char* what) {
    if (bytes <= bytes_) return;
    if (ptr_) {
      cudaFree(ptr_);  // waits for the work that may still use it
      ptr_ = nullptr;
      bytes_ = 0;
    }
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, bytes);
    if (status != cudaSuccess) {
      cudaGetLastError();
      throw Error("CUDA engine: cannot allocate " + mib(bytes) + " of GPU memory for " + what +
                  ": " + cudaGetErrorString(status));
    }
    ptr_ = p;
    bytes_ = bytes;
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Grid for a grid-stride loop over `count` elements.
inline unsigned int grid_for(std::size_t count, int threads) {
  const std::size_t blocks =
      (count + static_cast<std::size_t>(threads) - 1) / static_cast<std::size_t>(threads);
  return static_cast<unsigned int>(std::clamp<std::size_t>(blocks, 1, std::size_t{1} << 20));
}

}  // namespace attnres::cuda_engine

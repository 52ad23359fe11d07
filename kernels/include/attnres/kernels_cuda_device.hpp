// Device-pointer entry points of the CUDA kernels, for callers that keep their tensors on the GPU
// (the CUDA engine, engine/cuda/cuda_forward.cu). The host-pointer versions in kernels.hpp copy
// in, call these and copy out; tests/kernels/test_backend_ops.cpp validates them through that path.
//
// Only meaningful in a build with CUDA (ATTNRES_HAVE_CUDA); no CUDA header is needed to include
// this file: a stream is passed as the runtime's opaque CUstream_st* (what cudaStream_t is).
#pragma once

#include <cstddef>

struct CUstream_st;

namespace attnres::cuda {

// One depth-attention read (docs/math.md §2.2) over n sources that live in one device arena of
// (T, d) slots: source i is arena + slots[i] * slot_stride, a row-major (T, d) matrix. Device
// pointers:
//   h      (T, d) out           alpha (T, n) out
//   arena  slots of (T, d) in   slots (n) in: slot index of each source
//   query, gain (d) in: the pseudo-query w and the KeyNorm gain g
// h[t] = sum_i softmax_i(w . (g * v_i[t] / sqrt(mean(v_i[t]^2) + eps))) v_i[t]; alpha the weights.
// One thread block per token, one pass over the sources with an online softmax; no limit on n
// (the scores wait in alpha). Asynchronous on `stream` (nullptr: the legacy default stream).
// Throws attnres::Error when the sizes are not positive or the launch fails.
void depth_attention_forward_device(float* h, float* alpha, const float* arena,
                                    std::size_t slot_stride, const int* slots, const float* query,
                                    const float* gain, float eps, int n, int T, int d,
                                    CUstream_st* stream);

}  // namespace attnres::cuda

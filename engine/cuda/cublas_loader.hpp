// cuBLAS for the CUDA engine, loaded with dlopen when the first engine is made, not linked: a
// program linked with cuBLAS loads libcublasLt when it starts, which costs half a second of
// every run of attnres, attnres-lab and each test process, GPU or not (docs/engines.md, "CUDA").
// Internal to the engine library.
#pragma once

#include <cublas_v2.h>

namespace attnres::cuda_engine {

// The cuBLAS functions the engine calls (cublas_v2.h's names map to the _v2 symbols).
struct CublasApi {
  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasDestroy) destroy = nullptr;
  decltype(&cublasSetStream) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemm) sgemm = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// The loaded library's functions; the first call loads it. Throws attnres::Error naming the
// library and the loader's message when it cannot be loaded or lacks a function.
const CublasApi& cublas();

}  // namespace attnres::cuda_engine

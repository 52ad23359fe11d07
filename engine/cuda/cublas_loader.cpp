// cuBLAS loaded on first use (cublas_loader.hpp).
#include "cuda/cublas_loader.hpp"

#include <dlfcn.h>

#include <string>

#include "attnres/error.hpp"

namespace attnres::cuda_engine {
namespace {

struct Loaded {
  CublasApi api;
  std::string error;  // empty when every function was found
};

template <typename Function>
void resolve(void* library, const char* symbol, Function& function, std::string& error) {
  function = reinterpret_cast<Function>(dlsym(library, symbol));
  if (!function && error.empty()) error = std::string("the library has no ") + symbol;
}

Loaded load() {
  Loaded loaded;
  // The versioned name first (found through the program's run path, as the linked CUDA runtime
  // is), then the toolkit's file found when the project was configured.
  void* library = nullptr;
  std::string tried;
  for (const char* name : {ATTNRES_CUBLAS_SONAME, ATTNRES_CUBLAS_LIBRARY}) {
    library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (library) break;
    const char* why = dlerror();  // names the file
    tried +=
        std::string(tried.empty() ? "" : "; ") + (why ? why : std::string(name) + ": not found");
  }
  if (!library) {
    loaded.error = "cannot load cuBLAS (" + tried + ")";
    return loaded;
  }
  CublasApi& api = loaded.api;
  resolve(library, "cublasCreate_v2", api.create, loaded.error);
  resolve(library, "cublasDestroy_v2", api.destroy, loaded.error);
  resolve(library, "cublasSetStream_v2", api.set_stream, loaded.error);
  resolve(library, "cublasSetMathMode", api.set_math_mode, loaded.error);
  resolve(library, "cublasSgemm_v2", api.sgemm, loaded.error);
  resolve(library, "cublasGetStatusString", api.status_string, loaded.error);
  return loaded;
}

}  // namespace

const CublasApi& cublas() {
  static const Loaded loaded = load();  // once, thread-safe
  if (!loaded.error.empty()) throw Error("CUDA engine: " + loaded.error);
  return loaded.api;
}

}  // namespace attnres::cuda_engine

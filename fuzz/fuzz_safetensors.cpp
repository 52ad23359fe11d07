// libFuzzer target: the safetensors reader on arbitrary bytes. Any input must either parse (and
// then every tensor's values must be readable) or fail with attnres::Error; never crash, hang or
// read out of bounds (AddressSanitizer watches).
#include <cstdint>
#include <string>

#include "attnres/error.hpp"
#include "attnres/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto file = attnres::SafetensorsFile::parse(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    for (const auto& tensor : file.tensors()) {
      const auto values = file.values(tensor);
      if (static_cast<std::int64_t>(values.size()) != tensor.element_count()) __builtin_trap();
    }
  } catch (const attnres::Error&) {
  }
  return 0;
}

// libFuzzer target: hardware preset files.
#include <cstdint>
#include <string>

#include "attnres/error.hpp"
#include "attnres/hardware.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto hw =
        attnres::parse_hardware(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    if (!(hw.peak_flops > 0) || !(hw.hbm_bandwidth > 0)) __builtin_trap();
  } catch (const attnres::Error&) {
  }
  return 0;
}

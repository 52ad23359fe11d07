// libFuzzer target: config.json parsing and validation; a config that passes must allocate and
// describe a model of a sane size.
#include <cstdint>
#include <string>

#include "attnres/error.hpp"
#include "attnres/model_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto config =
        attnres::parse_model_config(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    // Round trip: what we write we must read back the same.
    const auto again =
        attnres::parse_model_config(attnres::model_config_to_json(config), "fuzz-rt");
    if (again.hidden_size != config.hidden_size ||
        again.attn_res.block_size != config.attn_res.block_size) {
      __builtin_trap();
    }
  } catch (const attnres::Error&) {
  }
  return 0;
}

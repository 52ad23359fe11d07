// libFuzzer target: the sharded-checkpoint index (model.safetensors.index.json) on arbitrary
// bytes, read against two small shards. Any input must either open (and then every listed tensor
// must be found in a shard that holds it, and the data must map) or fail with attnres::Error;
// never crash, hang or read out of bounds (AddressSanitizer watches).
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "attnres/checkpoint_files.hpp"
#include "attnres/error.hpp"
#include "attnres/safetensors.hpp"

namespace {

// A directory with two shards of one F32 tensor each, made once per process and removed at exit.
struct CheckpointDirectory {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("attnres-fuzz-index-" + std::to_string(::getpid()));
  CheckpointDirectory() {
    std::filesystem::create_directories(path);
    attnres::write_safetensors(path / "model-00001-of-00002.safetensors",
                               {{"model.norm.weight", {2}, {1.0f, 2.0f}, {}, false}});
    attnres::write_safetensors(path / "model-00002-of-00002.safetensors",
                               {{"lm_head.weight", {1, 2}, {3.0f, 4.0f}, {}, false}});
  }
  ~CheckpointDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

const std::filesystem::path& checkpoint_directory() {
  static const CheckpointDirectory dir;
  return dir.path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& dir = checkpoint_directory();
  {
    std::ofstream out(dir / attnres::kCheckpointIndexFile, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    auto files = attnres::CheckpointFiles::open(dir);
    files.load_data();
    for (const auto& [name, tensor] : files.tensors()) {
      if (files.find(name) == nullptr || tensor.file->find(name) != tensor.info) __builtin_trap();
      float values[2] = {0.0f, 0.0f};
      if (tensor.info->element_count() > 2) __builtin_trap();
      tensor.file->copy_values(*tensor.info, values);
    }
  } catch (const attnres::Error&) {
  }
  return 0;
}

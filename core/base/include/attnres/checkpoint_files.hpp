// The tensors of a Hugging Face checkpoint directory: one `model.safetensors`, or shards listed by
// `model.safetensors.index.json` ({"metadata": {"total_size": bytes}, "weight_map": {tensor name:
// shard file}}), as Hugging Face writes them (docs/interop.md).
//
//   CheckpointFiles files = CheckpointFiles::open("models/k3");   // headers and the index only
//   files.load_data();                                              // maps every shard
//   const auto* tensor = files.find("model.norm.weight");
//   tensor->file->copy_values(*tensor->info, out);
//
// Opening validates the index against the shards before any tensor data is read: the index is
// valid JSON (errors give its line and column), names only plain files of this directory, every
// listed tensor is in the shard it names, every shard's tensor is listed, no tensor is in two
// shards, and metadata.total_size, when given, is the shards' tensor bytes. Errors name the file
// (and the line and column of the index entry).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "attnres/safetensors.hpp"

namespace attnres {

inline constexpr const char* kSingleCheckpointFile = "model.safetensors";
inline constexpr const char* kCheckpointIndexFile = "model.safetensors.index.json";

class CheckpointFiles {
 public:
  struct Tensor {
    const SafetensorsFile* file;
    const TensorInfo* info;
  };

  CheckpointFiles() = default;
  CheckpointFiles(CheckpointFiles&&) =
      default;  // the tensors point into files_, which a move keeps
  CheckpointFiles& operator=(CheckpointFiles&&) = default;
  CheckpointFiles(const CheckpointFiles&) = delete;
  CheckpointFiles& operator=(const CheckpointFiles&) = delete;

  // Reads the headers (and the index of a sharded checkpoint) of `directory`. Throws
  // attnres::Error when neither file exists, when both do, or when the index is inconsistent.
  static CheckpointFiles open(const std::filesystem::path& directory);

  // Maps every file's data section (SafetensorsFile::load_data); once.
  void load_data();

  bool sharded() const { return sharded_; }
  // The index (sharded) or the single file: what errors about the checkpoint as a whole name.
  const std::string& source() const { return source_; }
  const std::vector<SafetensorsFile>& files() const { return files_; }
  // nullptr when absent. O(log n).
  const Tensor* find(const std::string& name) const;
  // Every tensor, in name order.
  const std::vector<std::pair<std::string, Tensor>>& tensors() const { return tensors_; }
  // The tensors' bytes over every file.
  std::uint64_t tensor_bytes() const;

 private:
  bool sharded_ = false;
  std::string source_;
  std::vector<SafetensorsFile> files_;
  std::vector<std::pair<std::string, Tensor>> tensors_;
  void index_tensors();
};

}  // namespace attnres

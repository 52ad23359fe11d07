#include "attnres/checkpoint_files.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/json_reading.hpp"

namespace attnres {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Where the index mentions `name` as a key ("name":), for located errors; the file's start when
// it cannot be found (an escaped name). A search from the start: called only for an error (once
// per entry, it made opening an index of n entries take time n^2).
std::string key_position(const std::string& source, const std::string& text,
                         const std::string& name) {
  const std::string quoted = json(name).dump();
  std::size_t at = 0;
  while ((at = text.find(quoted, at)) != std::string::npos) {
    std::size_t after = at + quoted.size();
    while (after < text.size() && (text[after] == ' ' || text[after] == '\t' ||
                                   text[after] == '\n' || text[after] == '\r'))
      ++after;
    if (after < text.size() && text[after] == ':') return text_position(source, text, at);
    at = after;
  }
  return text_position(source, text, 0);
}

// A shard name must be a plain file name of the checkpoint directory.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

}  // namespace

CheckpointFiles CheckpointFiles::open(const fs::path& directory) {
  const fs::path single = directory / kSingleCheckpointFile;
  const fs::path index = directory / kCheckpointIndexFile;
  std::error_code error;
  const bool has_single = fs::exists(single, error);
  const bool has_index = fs::exists(index, error);
  CheckpointFiles out;
  if (has_single && has_index) {
    throw Error(directory.string() + ": holds both " + kSingleCheckpointFile + " and " +
                kCheckpointIndexFile +
                "; a checkpoint is one file or shards with an index (remove one)");
  }
  if (!has_index) {
    out.source_ = single.string();
    out.files_.push_back(SafetensorsFile::read_header(single));  // names the missing file
    out.index_tensors();
    return out;
  }
  out.sharded_ = true;
  out.source_ = index.string();
  const std::string text = read_document(index, "a safetensors index file", kMaxShardIndexBytes);
  // Depth-capped, duplicate keys refused (a second entry for a tensor is an error, not ignored).
  const json root = parse_json_document(text, out.source_);
  if (!root.is_object()) {
    throw Error(text_position(out.source_, text, 0) +
                ": expected a JSON object with \"weight_map\" (Hugging Face sharded checkpoint)");
  }
  const auto map = root.find("weight_map");
  if (map == root.end() || !map->is_object()) {
    throw Error(text_position(out.source_, text, 0) +
                ": missing \"weight_map\" (an object from tensor name to shard file)");
  }
  if (map->empty())
    throw Error(key_position(out.source_, text, "weight_map") + ": weight_map is empty");
  // Shards in first-seen order; each listed tensor with its shard.
  std::map<std::string, std::size_t> shard_index;
  std::vector<std::pair<std::string, std::size_t>> listed;
  for (const auto& [name, shard] : map->items()) {
    const std::string& key = name;  // clang 14 cannot capture a structured binding
    const auto where = [&] { return key_position(out.source_, text, key); };
    if (!shard.is_string()) {
      throw Error(where() + ": weight_map[\"" + quote_untrusted(name) +
                  "\"] must be a shard file name, got " + describe_json(shard));
    }
    const std::string file = shard.get<std::string>();
    if (!plain_file_name(file)) {
      throw Error(where() + ": weight_map[\"" + quote_untrusted(name) + "\"] names '" +
                  quote_untrusted(file) + "', expected a file name inside " + directory.string());
    }
    auto [it, added] = shard_index.emplace(file, out.files_.size());
    if (added) {
      const fs::path path = directory / file;
      if (!fs::exists(path, error)) {
        throw Error(where() + ": tensor '" + quote_untrusted(name) + "' is in shard '" +
                    quote_untrusted(file) + "', which does not exist in " + directory.string());
      }
      out.files_.push_back(SafetensorsFile::read_header(path));
    }
    listed.emplace_back(name, it->second);
  }
  for (const auto& [name, shard] : listed) {
    if (out.files_[shard].find(name) == nullptr) {
      throw Error(key_position(out.source_, text, name) + ": tensor '" + name +
                  "' is listed in shard '" + out.files_[shard].source() +
                  "', which does not hold it");
    }
  }
  std::map<std::string, std::size_t> by_name(listed.begin(), listed.end());
  for (std::size_t f = 0; f < out.files_.size(); ++f) {
    for (const auto& tensor : out.files_[f].tensors()) {
      const auto it = by_name.find(tensor.name);
      if (it == by_name.end()) {
        throw Error(out.files_[f].source() + ": holds tensor '" + tensor.name + "', which " +
                    out.source_ + " does not list in its weight_map");
      }
      if (it->second != f) {
        throw Error(out.files_[f].source() + ": holds tensor '" + tensor.name + "', which " +
                    out.source_ + " places in '" + out.files_[it->second].source() +
                    "' (a tensor is in one shard)");
      }
    }
  }
  out.index_tensors();
  if (const auto metadata = root.find("metadata"); metadata != root.end()) {
    if (!metadata->is_object()) {
      throw Error(key_position(out.source_, text, "metadata") + ": metadata must be an object");
    }
    if (const auto total = metadata->find("total_size"); total != metadata->end()) {
      if (!total->is_number_unsigned()) {
        throw Error(key_position(out.source_, text, "total_size") +
                    ": metadata.total_size must be a byte count, got " + describe_json(*total));
      }
      if (total->get<std::uint64_t>() != out.tensor_bytes()) {
        throw Error(key_position(out.source_, text, "total_size") + ": metadata.total_size is " +
                    total->dump() + " bytes but the shards' tensors hold " +
                    std::to_string(out.tensor_bytes()) +
                    " (a shard is missing tensors or the index is stale)");
      }
    }
  }
  return out;
}

void CheckpointFiles::index_tensors() {
  tensors_.clear();
  for (const auto& file : files_) {
    for (const auto& tensor : file.tensors()) tensors_.push_back({tensor.name, {&file, &tensor}});
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
}

void CheckpointFiles::load_data() {
  for (auto& file : files_) file.load_data();
}

const CheckpointFiles::Tensor* CheckpointFiles::find(const std::string& name) const {
  const auto it =
      std::lower_bound(tensors_.begin(), tensors_.end(), name,
                       [](const auto& entry, const std::string& key) { return entry.first < key; });
  return it != tensors_.end() && it->first == name ? &it->second : nullptr;
}

std::uint64_t CheckpointFiles::tensor_bytes() const {
  std::uint64_t total = 0;
  for (const auto& [name, tensor] : tensors_) total += tensor.info->end - tensor.info->begin;
  return total;
}

}  // namespace attnres

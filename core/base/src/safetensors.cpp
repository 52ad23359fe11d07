#include "attnres/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "attnres/assert.hpp"
#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"

namespace attnres {

using nlohmann::json;

static_assert(std::endian::native == std::endian::little,
              "safetensors is little-endian; a big-endian host needs byte swapping");

std::string to_string(TensorDType dtype) {
  return enum_name(kTensorDTypeNames, dtype);
}

std::size_t element_size(TensorDType dtype) {
  switch (dtype) {
    case TensorDType::f64:
      return 8;
    case TensorDType::f32:
      return 4;
    case TensorDType::f16:
      return 2;
    case TensorDType::bf16:
      return 2;
  }
  return 0;
}

std::int64_t TensorInfo::element_count() const {
  std::int64_t count = 1;
  for (auto extent : shape) count *= extent;
  return count;
}

float half_to_float(std::uint16_t bits) {
  const std::uint32_t sign = (bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  std::uint32_t out;
  if (exponent == 0) {
    if (mantissa == 0) {
      out = sign;
    } else {  // subnormal: value = mantissa * 2^-24, exact in float
      const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
      return sign ? -magnitude : magnitude;
    }
  } else if (exponent == 0x1f) {
    out = sign | 0x7f800000u | (mantissa << 13);
  } else {
    out = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(out);
}

float bfloat16_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

namespace {

std::uint64_t read_u64(const json& value, const std::string& where) {
  if (!value.is_number_unsigned()) {
    throw Error(where + " must be a non-negative integer, got " + value.dump());
  }
  return value.get<std::uint64_t>();
}

// Multiplies with an overflow check; the bound is far above any real tensor.
std::uint64_t checked_multiply(std::uint64_t a, std::uint64_t b, const std::string& where) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) {
    throw Error(where + ": shape is too large (element count overflows 64 bits)");
  }
  return a * b;
}

}  // namespace

SafetensorsFile SafetensorsFile::parse(std::string bytes, const std::string& source) {
  SafetensorsFile file;
  file.source_ = source;
  if (bytes.size() < 8) {
    throw Error(source + ": truncated safetensors file (" + std::to_string(bytes.size()) +
                " bytes; at least 8 are needed for the header length)");
  }
  std::uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), 8);
  if (header_length > kMaxSafetensorsHeaderBytes) {
    throw Error(source + ": header length " + std::to_string(header_length) +
                " exceeds the limit of " + std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
  }
  if (header_length > bytes.size() - 8) {
    throw Error(source + ": truncated safetensors file (header says " +
                std::to_string(header_length) + " bytes of JSON, only " +
                std::to_string(bytes.size() - 8) + " follow)");
  }
  const std::string header_text = bytes.substr(8, header_length);

  // Duplicate names: nlohmann keeps the last silently, so watch the keys of the top-level object.
  std::set<std::string> seen_keys;
  std::string duplicate;
  json::parser_callback_t watch_duplicates = [&](int depth, json::parse_event_t event,
                                                 json& parsed) {
    if (event == json::parse_event_t::key && depth == 1) {
      const auto key = parsed.get<std::string>();
      if (!seen_keys.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(header_text, watch_duplicates);
  } catch (const json::exception& error) {  // parse_error, and out_of_range for numbers like 1e3060
    throw Error(source + ": header is not valid JSON (" + error.what() + ")");
  }
  if (!duplicate.empty()) throw Error(source + ": duplicate tensor name '" + duplicate + "'");
  if (!header.is_object()) throw Error(source + ": header must be a JSON object");

  file.data_start_ = 8 + static_cast<std::size_t>(header_length);
  const std::uint64_t data_size = bytes.size() - file.data_start_;

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw Error(source + ": __metadata__ must be an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) {
          throw Error(source + ": __metadata__." + key + " must be a string");
        }
        file.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string where = source + ": tensor '" + name + "'";
    if (!entry.is_object()) throw Error(where + ": entry must be an object");
    for (const char* key : {"dtype", "shape", "data_offsets"}) {
      if (!entry.contains(key)) throw Error(where + ": missing '" + key + "'");
    }
    if (!entry["dtype"].is_string()) throw Error(where + ": dtype must be a string");
    TensorInfo info;
    info.name = name;
    info.dtype = parse_enum(kTensorDTypeNames, entry["dtype"].get<std::string>(), where,
                            "unsupported dtype");
    const json& shape = entry["shape"];
    if (!shape.is_array()) throw Error(where + ": shape must be an array of integers");
    std::uint64_t element_count = 1;
    for (const auto& extent : shape) {
      const auto value = read_u64(extent, where + ": shape entry");
      if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        throw Error(where + ": shape entry " + std::to_string(value) + " is too large");
      }
      element_count = checked_multiply(element_count, value, where);
      info.shape.push_back(static_cast<std::int64_t>(value));
    }
    const json& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2) {
      throw Error(where + ": data_offsets must be [begin, end]");
    }
    info.begin = read_u64(offsets[0], where + ": data_offsets[0]");
    info.end = read_u64(offsets[1], where + ": data_offsets[1]");
    if (info.end < info.begin) {
      throw Error(where + ": data_offsets end " + std::to_string(info.end) + " < begin " +
                  std::to_string(info.begin));
    }
    const std::uint64_t expected_bytes =
        checked_multiply(element_count, element_size(info.dtype), where);
    if (info.end - info.begin != expected_bytes) {
      throw Error(where + ": byte range [" + std::to_string(info.begin) + ", " +
                  std::to_string(info.end) + ") holds " + std::to_string(info.end - info.begin) +
                  " bytes but shape x element size needs " + std::to_string(expected_bytes));
    }
    if (info.end > data_size) {
      throw Error(where + ": byte range [" + std::to_string(info.begin) + ", " +
                  std::to_string(info.end) + ") runs past the end of the data section (" +
                  std::to_string(data_size) + " bytes; the file is truncated or inconsistent)");
    }
    file.tensors_.push_back(std::move(info));
  }

  std::vector<const TensorInfo*> by_offset;
  for (const auto& tensor : file.tensors_) by_offset.push_back(&tensor);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->begin < b->begin; });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end) {
      throw Error(source + ": tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name +
                  "' overlap in the data section");
    }
  }
  file.bytes_ = std::move(bytes);
  return file;
}

SafetensorsFile SafetensorsFile::read(const std::filesystem::path& path) {
  return parse(read_file(path), path.string());
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  for (const auto& tensor : tensors_) {
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

std::vector<double> SafetensorsFile::values(const TensorInfo& tensor) const {
  const auto count = static_cast<std::size_t>(tensor.element_count());
  // parse() checked every tensor's offsets against its shape and the data section; a TensorInfo
  // from another file would read past this one's bytes.
  ATTNRES_ASSERT(tensor.end - tensor.begin == count * element_size(tensor.dtype) &&
                     data_start_ + tensor.end <= bytes_.size(),
                 "tensor '" + tensor.name + "' lies inside this file's data section");
  std::vector<double> out(count);
  const char* data = bytes_.data() + data_start_ + tensor.begin;
  for (std::size_t i = 0; i < count; ++i) {
    switch (tensor.dtype) {
      case TensorDType::f64: {
        double value;
        std::memcpy(&value, data + 8 * i, 8);
        out[i] = value;
        break;
      }
      case TensorDType::f32: {
        float value;
        std::memcpy(&value, data + 4 * i, 4);
        out[i] = value;
        break;
      }
      case TensorDType::f16:
      case TensorDType::bf16: {
        std::uint16_t bits;
        std::memcpy(&bits, data + 2 * i, 2);
        out[i] = tensor.dtype == TensorDType::f16 ? half_to_float(bits) : bfloat16_to_float(bits);
        break;
      }
    }
  }
  return out;
}

std::string serialize_safetensors(const std::vector<TensorToWrite>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  std::set<std::string> names;
  for (const auto& tensor : tensors) {
    std::int64_t count = 1;
    for (auto extent : tensor.shape) count *= extent;
    const std::size_t elements = tensor.f64 ? tensor.data_f64.size() : tensor.data.size();
    if (count != static_cast<std::int64_t>(elements)) {
      throw Error("cannot write tensor '" + tensor.name + "': shape holds " +
                  std::to_string(count) + " elements, data has " + std::to_string(elements));
    }
    if (!names.insert(tensor.name).second) {
      throw Error("cannot write tensor '" + tensor.name + "': duplicate name");
    }
    const std::uint64_t bytes = elements * (tensor.f64 ? sizeof(double) : sizeof(float));
    header[tensor.name] = {{"dtype", tensor.f64 ? "F64" : "F32"},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  const std::uint64_t header_length = header_text.size();

  std::string out;
  out.resize(8 + header_text.size() + offset);
  std::memcpy(out.data(), &header_length, 8);
  std::memcpy(out.data() + 8, header_text.data(), header_text.size());
  char* cursor = out.data() + 8 + header_text.size();
  for (const auto& tensor : tensors) {
    // data() may be null: memcpy from null is undefined even for 0 bytes.
    if (tensor.f64 && !tensor.data_f64.empty()) {
      std::memcpy(cursor, tensor.data_f64.data(), tensor.data_f64.size() * sizeof(double));
      cursor += tensor.data_f64.size() * sizeof(double);
    } else if (!tensor.f64 && !tensor.data.empty()) {
      std::memcpy(cursor, tensor.data.data(), tensor.data.size() * sizeof(float));
      cursor += tensor.data.size() * sizeof(float);
    }
  }
  ATTNRES_ASSERT(cursor == out.data() + out.size(), "the tensors fill the data section exactly");
  return out;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomically(path, serialize_safetensors(tensors, metadata));
}

}  // namespace attnres

#include "attnres/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <unordered_set>

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

namespace {

// The names of the header's top-level object, in one linear SAX pass: nlohmann keeps the last of
// two equal keys silently, and its callback parser rescans the parent object after every value
// it closes (quadratic in the number of tensors), so duplicates are found here instead.
class TopLevelKeys : public json::json_sax_t {
 public:
  std::string duplicate;  // the first name seen twice

  bool key(string_t& name) override {
    if (depth_ == 1 && !names_.insert(name).second && duplicate.empty()) duplicate = name;
    return true;
  }
  bool start_object(std::size_t) override { return ++depth_, true; }
  bool end_object() override { return --depth_, true; }
  bool start_array(std::size_t) override { return ++depth_, true; }
  bool end_array() override { return --depth_, true; }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  // The DOM parse that follows reports the error with its position.
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  int depth_ = 0;
  std::unordered_set<std::string> names_;
};

// Reads exactly `size` bytes at `offset` of `path`, or throws naming the file.
std::string read_range(const std::filesystem::path& path, std::uint64_t offset, std::uint64_t size,
                       const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path.string() + "': cannot open it");
  in.seekg(static_cast<std::streamoff>(offset));
  std::string bytes(static_cast<std::size_t>(size), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  if (!in || static_cast<std::uint64_t>(in.gcount()) != size) {
    throw Error(path.string() + ": reading " + what + " failed (the file is shorter than " +
                std::to_string(offset + size) + " bytes; did it change while being read?)");
  }
  return bytes;
}

}  // namespace

void SafetensorsFile::check_header_length(std::uint64_t header_length, std::uint64_t file_size,
                                          const std::string& source) {
  if (header_length > kMaxSafetensorsHeaderBytes) {
    throw Error(source + ": header length " + std::to_string(header_length) +
                " exceeds the limit of " + std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
  }
  if (header_length > file_size - 8) {
    throw Error(source + ": truncated safetensors file (header says " +
                std::to_string(header_length) + " bytes of JSON, only " +
                std::to_string(file_size - 8) + " follow)");
  }
}

SafetensorsFile SafetensorsFile::parse(std::string bytes, const std::string& source) {
  if (bytes.size() < 8) {
    throw Error(source + ": truncated safetensors file (" + std::to_string(bytes.size()) +
                " bytes; at least 8 are needed for the header length)");
  }
  std::uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), 8);
  check_header_length(header_length, bytes.size(), source);
  SafetensorsFile file = from_header(std::string_view(bytes).substr(8, header_length),
                                     bytes.size() - 8 - header_length, source);
  file.data_start_ = 8 + static_cast<std::size_t>(header_length);
  file.bytes_ = std::move(bytes);
  file.data_loaded_ = true;
  return file;
}

SafetensorsFile SafetensorsFile::read_header(const std::filesystem::path& path) {
  const std::string source = path.string();
  std::error_code error;
  if (const std::string what = not_a_regular_file(path); !what.empty()) {
    throw Error("cannot read '" + source + "': " + what +
                (what == "no such file" ? "" : ", expected a .safetensors file"));
  }
  const std::uint64_t file_size = std::filesystem::file_size(path, error);
  if (error) throw Error("cannot read '" + source + "': " + error.message());
  if (file_size < 8) {
    throw Error(source + ": truncated safetensors file (" + std::to_string(file_size) +
                " bytes; at least 8 are needed for the header length)");
  }
  std::uint64_t header_length = 0;
  std::memcpy(&header_length, read_range(path, 0, 8, "the header length").data(), 8);
  check_header_length(header_length, file_size, source);
  SafetensorsFile file = from_header(read_range(path, 8, header_length, "the header"),
                                     file_size - 8 - header_length, source);
  file.path_ = path;
  file.data_offset_in_file_ = 8 + header_length;
  return file;
}

void SafetensorsFile::load_data() {
  if (data_loaded_) return;
  bytes_ = read_range(path_, data_offset_in_file_, data_size_, "the tensor data");
  // The file may have grown since its header was read: only the declared size was read.
  data_start_ = 0;
  data_loaded_ = true;
}

SafetensorsFile SafetensorsFile::from_header(std::string_view header_text, std::uint64_t data_size,
                                             const std::string& source) {
  SafetensorsFile file;
  file.source_ = source;
  file.data_size_ = data_size;
  TopLevelKeys keys;
  json::sax_parse(header_text, &keys);
  json header;
  try {
    header = json::parse(header_text);
  } catch (const json::exception& error) {  // parse_error, and out_of_range for numbers like 1e3060
    throw Error(source + ": header is not valid JSON (" + error.what() + ")");
  }
  if (!keys.duplicate.empty())
    throw Error(source + ": duplicate tensor name '" + keys.duplicate + "'");
  if (!header.is_object()) throw Error(source + ": header must be a JSON object");

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
  // By name, for find(); a JSON object's items already come in key order.
  std::sort(file.tensors_.begin(), file.tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });

  // Overlaps: sorted by offset, ranges are disjoint when each begins at or after the end of the
  // one before (n log n, not a comparison of every pair).
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(file.tensors_.size());
  for (const auto& tensor : file.tensors_) by_offset.push_back(&tensor);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end) {
      throw Error(source + ": tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name +
                  "' overlap in the data section");
    }
  }
  return file;
}

SafetensorsFile SafetensorsFile::read(const std::filesystem::path& path) {
  SafetensorsFile file = read_header(path);
  file.load_data();
  return file;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  const auto it = std::lower_bound(
      tensors_.begin(), tensors_.end(), name,
      [](const TensorInfo& tensor, const std::string& key) { return tensor.name < key; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

std::vector<double> SafetensorsFile::values(const TensorInfo& tensor) const {
  const auto count = static_cast<std::size_t>(tensor.element_count());
  // parse() checked every tensor's offsets against its shape and the data section; a TensorInfo
  // from another file would read past this one's bytes.
  if (!data_loaded_) {
    throw Error(source_ + ": the tensor data of '" + tensor.name +
                "' was not read (read_header without load_data)");
  }
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

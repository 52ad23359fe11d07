#include "attnres/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "attnres/assert.hpp"
#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/json_reading.hpp"

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
    throw Error(where + " must be a non-negative integer, got " + describe_json(value));
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

// The file a SafetensorsFile opened for its header (read_header), held in its map_ (closed with
// the last copy): its tensors are read from this descriptor with pread, not memory-mapped, so a
// file truncated meanwhile is an error (a mapping gave SIGBUS), and a file renamed over the path
// later does not mix in.
struct OpenFile {
  int fd = -1;
  std::string source;
  // raw_bytes' copies of tensors, which its string_views point into (tests and tools that copy a
  // few tensors; the models' tensors are converted with copy_values, a chunk at a time).
  mutable std::mutex raw_mutex;
  mutable std::deque<std::string> raw;
  explicit OpenFile(int descriptor, std::string name) : fd(descriptor), source(std::move(name)) {}
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
  std::uint64_t size() const {
    struct stat status {};
    return ::fstat(fd, &status) == 0 ? static_cast<std::uint64_t>(status.st_size) : 0;
  }
  // Exactly `size` bytes at `offset`, or attnres::Error: the file was `expected` bytes long when
  // its header was read, and a short read means it shrank since.
  void read_exactly(std::uint64_t offset, std::size_t size, char* out,
                    std::uint64_t expected) const {
    std::size_t done = 0;
    while (done < size) {
      const ssize_t got = ::pread(fd, out + done, size - done, static_cast<off_t>(offset + done));
      if (got < 0) {
        if (errno == EINTR) continue;
        throw Error("cannot read '" + source + "': " + std::strerror(errno));
      }
      if (got == 0) {
        throw Error(source + " changed while it was read (now " + std::to_string(this->size()) +
                    " bytes, expected " + std::to_string(expected) + ")");
      }
      done += static_cast<std::size_t>(got);
    }
  }
};

const OpenFile& open_file(const std::shared_ptr<const void>& file) {
  return *static_cast<const OpenFile*>(file.get());
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
  if (const std::string what = not_a_regular_file(path); !what.empty()) {
    throw Error("cannot read '" + source + "': " + what +
                (what == "no such file" ? "" : ", expected a .safetensors file"));
  }
  // The descriptor is kept: the tensors are read from this file, whatever is renamed over its
  // path later. O_NONBLOCK: a FIFO swapped in after the check must not block the open.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) throw Error("cannot read '" + source + "': " + std::strerror(errno));
  auto opened = std::make_shared<const OpenFile>(fd, source);
  struct stat status {};
  if (::fstat(fd, &status) != 0)
    throw Error("cannot read '" + source + "': " + std::strerror(errno));
  if (!S_ISREG(status.st_mode))
    throw Error("cannot read '" + source +
                "': is not a regular file, expected a .safetensors file");
  const auto file_size = static_cast<std::uint64_t>(status.st_size);
  if (file_size < 8) {
    throw Error(source + ": truncated safetensors file (" + std::to_string(file_size) +
                " bytes; at least 8 are needed for the header length)");
  }
  std::uint64_t header_length = 0;
  opened->read_exactly(0, 8, reinterpret_cast<char*>(&header_length), file_size);
  check_header_length(header_length, file_size, source);
  std::string header(static_cast<std::size_t>(header_length), '\0');
  opened->read_exactly(8, header.size(), header.data(), file_size);
  SafetensorsFile file = from_header(header, file_size - 8 - header_length, source);
  file.path_ = path;
  file.map_ = std::move(opened);
  file.data_offset_in_file_ = 8 + header_length;
  return file;
}

void SafetensorsFile::load_data() {
  if (data_loaded_) return;
  // The file may have grown since its header was read: only the declared size is used. One that
  // shrank is refused here; one that shrinks later is refused by the read that comes back short.
  const std::uint64_t expected = data_offset_in_file_ + data_size_;
  if (const std::uint64_t now = open_file(map_).size(); now < expected) {
    throw Error(source_ + " changed while it was read (now " + std::to_string(now) +
                " bytes, expected " + std::to_string(expected) + ")");
  }
  data_loaded_ = true;
}

SafetensorsFile SafetensorsFile::from_header(std::string_view header_text, std::uint64_t data_size,
                                             const std::string& source) {
  SafetensorsFile file;
  file.source_ = source;
  file.data_size_ = data_size;
  // Nesting capped; a name twice is refused (nlohmann would keep the last one silently). One
  // linear pass (nlohmann's callback parser rescans the parent object after every value).
  JsonReadOptions options;
  options.top_level_key_name = "tensor name";
  const json header = parse_json_document(std::string(header_text), source + " header", options);
  if (!header.is_object()) throw Error(source + ": header must be a JSON object");

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw Error(source + ": __metadata__ must be an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) {
          throw Error(source + ": __metadata__." + quote_untrusted(key) + " must be a string");
        }
        file.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string where = source + ": tensor '" + quote_untrusted(name) + "'";
    if (!entry.is_object()) throw Error(where + ": entry must be an object");
    for (const char* key : {"dtype", "shape", "data_offsets"}) {
      if (!entry.contains(key)) throw Error(where + ": missing '" + key + "'");
    }
    if (!entry["dtype"].is_string()) throw Error(where + ": dtype must be a string");
    TensorInfo info;
    info.name = name;
    info.dtype = parse_enum(kTensorDTypeNames, quote_untrusted(entry["dtype"].get<std::string>()),
                            where, "unsupported dtype");
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
      throw Error(source + ": tensors '" + quote_untrusted(by_offset[i - 1]->name) + "' and '" +
                  quote_untrusted(by_offset[i]->name) + "' overlap in the data section");
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

const char* SafetensorsFile::checked_data(const TensorInfo& tensor) const {
  // parse() checked every tensor's offsets against its shape and the data section; a TensorInfo
  // from another file would read past this one's bytes.
  if (!data_loaded_) {
    throw Error(source_ + ": the tensor data of '" + quote_untrusted(tensor.name) +
                "' was not read (read_header without load_data)");
  }
  ATTNRES_ASSERT(tensor.end - tensor.begin == static_cast<std::uint64_t>(tensor.element_count()) *
                                                  element_size(tensor.dtype) &&
                     tensor.end <= data_size_,
                 "tensor '" + tensor.name + "' lies inside this file's data section");
  // Null for a file opened by read_header: its tensors are read with pread (OpenFile).
  return map_ ? nullptr : bytes_.data() + data_start_ + tensor.begin;
}

std::string_view SafetensorsFile::raw_bytes(const TensorInfo& tensor) const {
  const auto size = static_cast<std::size_t>(tensor.end - tensor.begin);
  if (const char* data = checked_data(tensor)) return {data, size};
  const OpenFile& file = open_file(map_);
  std::string bytes(size, '\0');
  file.read_exactly(data_offset_in_file_ + tensor.begin, size, bytes.data(),
                    data_offset_in_file_ + data_size_);
  const std::lock_guard<std::mutex> lock(file.raw_mutex);
  file.raw.push_back(std::move(bytes));
  return file.raw.back();
}

namespace {

template <typename Out>
void convert_elements(const char* data, TensorDType dtype, std::size_t count, Out* out) {
  switch (dtype) {
    case TensorDType::f64:
      for (std::size_t i = 0; i < count; ++i) {
        double value;
        std::memcpy(&value, data + 8 * i, 8);
        out[i] = static_cast<Out>(value);
      }
      return;
    case TensorDType::f32:
      for (std::size_t i = 0; i < count; ++i) {
        float value;
        std::memcpy(&value, data + 4 * i, 4);
        out[i] = value;
      }
      return;
    case TensorDType::f16:
    case TensorDType::bf16: {
      const bool half = dtype == TensorDType::f16;
      for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, data + 2 * i, 2);
        out[i] = half ? half_to_float(bits) : bfloat16_to_float(bits);
      }
      return;
    }
  }
}

}  // namespace

namespace {

// The tensor's elements into `out`: straight from memory (parse), or read from the file a chunk
// at a time (read_header): memory for one chunk, not for the tensor's bytes.
template <typename Out>
void convert_tensor(const char* in_memory, const std::shared_ptr<const void>& file,
                    std::uint64_t data_offset, std::uint64_t file_size, const TensorInfo& tensor,
                    Out* out) {
  const auto count = static_cast<std::size_t>(tensor.element_count());
  if (in_memory) {
    convert_elements(in_memory, tensor.dtype, count, out);
    return;
  }
  const std::size_t element = element_size(tensor.dtype);
  constexpr std::size_t kChunkBytes = std::size_t{1} << 20;
  const std::size_t per_chunk = kChunkBytes / element;
  std::vector<char> chunk(std::min(count, per_chunk) * element);
  for (std::size_t done = 0; done < count;) {
    const std::size_t n = std::min(per_chunk, count - done);
    open_file(file).read_exactly(data_offset + tensor.begin + done * element, n * element,
                                 chunk.data(), file_size);
    convert_elements(chunk.data(), tensor.dtype, n, out + done);
    done += n;
  }
}

}  // namespace

void SafetensorsFile::copy_values(const TensorInfo& tensor, double* out) const {
  convert_tensor(checked_data(tensor), map_, data_offset_in_file_,
                 data_offset_in_file_ + data_size_, tensor, out);
}

void SafetensorsFile::copy_values(const TensorInfo& tensor, float* out) const {
  convert_tensor(checked_data(tensor), map_, data_offset_in_file_,
                 data_offset_in_file_ + data_size_, tensor, out);
}

std::vector<double> SafetensorsFile::values(const TensorInfo& tensor) const {
  std::vector<double> out(static_cast<std::size_t>(tensor.element_count()));
  copy_values(tensor, out.data());
  return out;
}

std::uint16_t float_to_bfloat16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);  // to nearest, ties to even
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

std::uint16_t float_to_half(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (magnitude < 0x38800000u) {
    // Below the smallest normal half (2^-14): a subnormal, value / 2^-24 rounded to an integer
    // (to nearest, ties to even; exact in float arithmetic at these magnitudes).
    const float scaled = std::bit_cast<float>(magnitude) * 0x1p24f;
    auto mantissa = static_cast<std::uint32_t>(scaled);
    const float rest = scaled - static_cast<float>(mantissa);
    if (rest > 0.5f || (rest == 0.5f && (mantissa & 1u))) ++mantissa;
    return static_cast<std::uint16_t>(sign | mantissa);  // 0x400 carries into the exponent
  }
  // Normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits.
  const std::uint32_t rebased = magnitude - (112u << 23);
  const std::uint32_t rounding = 0xfffu + ((rebased >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rebased + rounding) >> 13));
}

std::string encode_floats(const float* data, std::size_t count, TensorDType dtype,
                          const std::string& what) {
  std::string out(count * element_size(dtype), '\0');
  for (std::size_t i = 0; i < count; ++i) {
    const float value = data[i];
    if (!std::isfinite(value)) {
      throw Error(what + ": non-finite value at flat index " + std::to_string(i));
    }
    switch (dtype) {
      case TensorDType::f64: {
        const double wide = value;
        std::memcpy(out.data() + 8 * i, &wide, 8);
        break;
      }
      case TensorDType::f32:
        std::memcpy(out.data() + 4 * i, &value, 4);
        break;
      case TensorDType::f16: {
        const std::uint16_t bits = float_to_half(value);
        if ((bits & 0x7c00u) == 0x7c00u) {
          throw Error(what + ": value " + std::to_string(value) + " at flat index " +
                      std::to_string(i) + " overflows F16 (largest 65504); write BF16 or F32");
        }
        std::memcpy(out.data() + 2 * i, &bits, 2);
        break;
      }
      case TensorDType::bf16: {
        const std::uint16_t bits = float_to_bfloat16(value);
        std::memcpy(out.data() + 2 * i, &bits, 2);
        break;
      }
    }
  }
  return out;
}

std::string serialize_safetensors(const std::vector<RawTensor>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  std::set<std::string> names;
  for (const auto& tensor : tensors) {
    std::uint64_t count = 1;
    for (auto extent : tensor.shape) {
      if (extent < 0) throw Error("cannot write tensor '" + tensor.name + "': negative extent");
      count = checked_multiply(count, static_cast<std::uint64_t>(extent), tensor.name);
    }
    const std::uint64_t bytes = checked_multiply(count, element_size(tensor.dtype), tensor.name);
    if (bytes != tensor.bytes.size()) {
      throw Error("cannot write tensor '" + tensor.name + "': shape holds " +
                  std::to_string(count) + " elements, data has " +
                  std::to_string(tensor.bytes.size() / element_size(tensor.dtype)));
    }
    if (!names.insert(tensor.name).second) {
      throw Error("cannot write tensor '" + tensor.name + "': duplicate name");
    }
    header[tensor.name] = {{"dtype", to_string(tensor.dtype)},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  const std::uint64_t header_length = header_text.size();

  std::string out;
  out.reserve(8 + header_text.size() + offset);
  out.append(reinterpret_cast<const char*>(&header_length), 8);
  out.append(header_text);
  for (const auto& tensor : tensors) out.append(tensor.bytes);
  ATTNRES_ASSERT(out.size() == 8 + header_text.size() + offset,
                 "the tensors fill the data section exactly");
  return out;
}

std::string serialize_safetensors(const std::vector<TensorToWrite>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  std::vector<RawTensor> raw;
  raw.reserve(tensors.size());
  for (const auto& tensor : tensors) {
    RawTensor out{tensor.name, tensor.f64 ? TensorDType::f64 : TensorDType::f32, tensor.shape, {}};
    const std::size_t elements = tensor.f64 ? tensor.data_f64.size() : tensor.data.size();
    // data() may be null: memcpy from null is undefined even for 0 bytes.
    if (tensor.f64 && elements > 0) {
      out.bytes.assign(reinterpret_cast<const char*>(tensor.data_f64.data()),
                       elements * sizeof(double));
    } else if (!tensor.f64 && elements > 0) {
      out.bytes.assign(reinterpret_cast<const char*>(tensor.data.data()), elements * sizeof(float));
    }
    raw.push_back(std::move(out));
  }
  return serialize_safetensors(raw, metadata);
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomically(path, serialize_safetensors(tensors, metadata));
}

}  // namespace attnres

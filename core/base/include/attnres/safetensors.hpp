// The safetensors container: an 8-byte little-endian header length, a JSON header, then the data.
//
//   { "name": {"dtype": "F32", "shape": [r, c], "data_offsets": [begin, end]}, ...,
//     "__metadata__": {"key": "value"} }
//
// Offsets are relative to the start of the data section. Reading validates everything a broken or
// hostile file could get wrong (header length bound, JSON, dtypes, shape x element size equals the
// byte range, ranges inside the buffer and not overlapping, no duplicate names) and names the file
// and the tensor in each error. Reads F64, F32, F16 and BF16 (with pread, a chunk at a time);
// writes F32 and F64 (TensorToWrite) or any of the four from raw bytes (RawTensor).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attnres/enum_names.hpp"

namespace attnres {

enum class TensorDType { f64, f32, f16, bf16 };
// In the order error messages list them.
inline constexpr EnumNames<TensorDType, 4> kTensorDTypeNames{{{TensorDType::f32, "F32"},
                                                              {TensorDType::f16, "F16"},
                                                              {TensorDType::bf16, "BF16"},
                                                              {TensorDType::f64, "F64"}}};

std::string to_string(TensorDType dtype);
std::size_t element_size(TensorDType dtype);

struct TensorInfo {
  std::string name;
  TensorDType dtype = TensorDType::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte offset into the data section
  std::uint64_t end = 0;    // one past the last byte
  std::int64_t element_count() const;
};

// Largest header accepted (the reference implementation uses the same bound).
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

class SafetensorsFile {
 public:
  // Parses and validates a whole file held in memory; `source` names it in errors.
  static SafetensorsFile parse(std::string bytes, const std::string& source);
  // Reads the header only and validates it against the file's size (every tensor's range inside
  // the data section, no overlaps, no duplicates): a broken file is refused before any tensor
  // data is read. values() then needs load_data().
  static SafetensorsFile read_header(const std::filesystem::path& path);
  // Makes the data section of a file opened by read_header readable (once; later calls do
  // nothing): checks the file still holds it. Tensors are read (pread) from the file read_header
  // opened when they are converted; a short read is an Error "FILE changed while it was read".
  void load_data();
  // read_header + load_data.
  static SafetensorsFile read(const std::filesystem::path& path);

  // In name order. Validation takes O(n log n) in the number of tensors; find() is a binary
  // search.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& source() const { return source_; }
  // nullptr when absent.
  const TensorInfo* find(const std::string& name) const;
  // The tensor's elements converted to double (exact for every supported dtype), row-major.
  std::vector<double> values(const TensorInfo& tensor) const;
  // The same written into `out` (element_count() elements): exact for double; for float exact
  // for F32, F16 and BF16 and rounded to nearest for F64.
  void copy_values(const TensorInfo& tensor, double* out) const;
  void copy_values(const TensorInfo& tensor, float* out) const;
  // The tensor's bytes as stored (little-endian elements of its dtype).
  std::string_view raw_bytes(const TensorInfo& tensor) const;

 private:
  static SafetensorsFile from_header(std::string_view header_text, std::uint64_t data_size,
                                     const std::string& source);
  static void check_header_length(std::uint64_t header_length, std::uint64_t file_size,
                                  const std::string& source);

  std::string source_;
  std::filesystem::path path_;  // read_header: the file load_data reads
  std::uint64_t data_offset_in_file_ = 0;
  std::uint64_t data_size_ = 0;
  bool data_loaded_ = false;
  std::string bytes_;                // the whole file (parse) or its data section (no mapping)
  std::shared_ptr<const void> map_;  // read_header's open file (pread), closed with the last copy
  std::size_t data_start_ = 0;       // where the data section starts in bytes_ or in map_
  const char* checked_data(const TensorInfo& tensor) const;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct TensorToWrite {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> data;       // row-major, element count = product of shape: written as F32
  std::vector<double> data_f64;  // used instead when `f64` is set: written as F64
  bool f64 = false;
};

// Serialises F32 / F64 tensors (header padded with spaces to 8-byte alignment, tensors in the given
// order) into the file's bytes.
std::string serialize_safetensors(const std::vector<TensorToWrite>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});
// Writes atomically (temporary file + rename).
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// A tensor of any dtype as its stored bytes (element_size(dtype) x product(shape) of them).
struct RawTensor {
  std::string name;
  TensorDType dtype = TensorDType::f32;
  std::vector<std::int64_t> shape;
  std::string bytes;
};
// The file's bytes for raw tensors, in the given order (the one serializer behind both forms).
std::string serialize_safetensors(const std::vector<RawTensor>& tensors,
                                  const std::map<std::string, std::string>& metadata);
// `count` floats as `dtype`'s bytes: F32 and F64 exactly, F16 and BF16 rounded to nearest even
// (exact for values that came from that dtype). Throws attnres::Error naming `what` for a value
// that is not finite or overflows F16 (|x| > 65504).
std::string encode_floats(const float* data, std::size_t count, TensorDType dtype,
                          const std::string& what);

// IEEE binary16 and bfloat16 to float (exact), and back (round to nearest even; NaN stays NaN,
// overflow gives infinity).
float half_to_float(std::uint16_t bits);
float bfloat16_to_float(std::uint16_t bits);
std::uint16_t float_to_half(float value);
std::uint16_t float_to_bfloat16(float value);

}  // namespace attnres

// The safetensors container: an 8-byte little-endian header length, a JSON header, then the data.
//
//   { "name": {"dtype": "F32", "shape": [r, c], "data_offsets": [begin, end]}, ...,
//     "__metadata__": {"key": "value"} }
//
// Offsets are relative to the start of the data section. Reading validates everything a broken or
// hostile file could get wrong (header length bound, JSON, dtypes, shape x element size equals the
// byte range, ranges inside the buffer and not overlapping, no duplicate names) and names the file
// and the tensor in each error. Reads F64, F32, F16 and BF16; writes F32.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
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
  static SafetensorsFile read(const std::filesystem::path& path);

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& source() const { return source_; }
  // nullptr when absent.
  const TensorInfo* find(const std::string& name) const;
  // The tensor's elements converted to double (exact for every supported dtype), row-major.
  std::vector<double> values(const TensorInfo& tensor) const;

 private:
  std::string source_;
  std::string bytes_;
  std::size_t data_start_ = 0;
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

// IEEE binary16 and bfloat16 to float (exact).
float half_to_float(std::uint16_t bits);
float bfloat16_to_float(std::uint16_t bits);

}  // namespace attnres

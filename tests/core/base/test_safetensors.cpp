// The safetensors reader and writer: round trip, F16/BF16 decoding, and every broken-file case.
#include <gtest/gtest.h>

#include <cstring>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/safetensors.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_safetensors {

// A file from a raw header and data section.
std::string make_file(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  const std::uint64_t length = header.size();
  std::memcpy(out.data(), &length, 8);
  return out + header + data;
}

// Parsing must fail with a message that names the file and contains `needle`.
void expect_rejected(const std::string& bytes, const std::string& needle) {
  try {
    SafetensorsFile::parse(bytes, "bad.safetensors");
    ADD_FAILURE() << "accepted a bad file; expected an error containing '" << needle << "'";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("bad.safetensors"), std::string::npos) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
}

TEST(Safetensors, RoundTripKeepsNamesShapesValuesAndMetadata) {
  const std::vector<TensorToWrite> tensors = {
      {"a", {2, 3}, {1, 2, 3, 4, 5, -6.5f}}, {"b.c", {1}, {0.25f}}, {"empty", {0, 4}, {}}};
  const auto file = SafetensorsFile::parse(serialize_safetensors(tensors, {{"k", "v"}}), "rt");
  EXPECT_EQ(file.metadata().at("k"), "v");
  ASSERT_EQ(file.tensors().size(), 3u);
  const TensorInfo* a = file.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(file.values(*a), (std::vector<double>{1, 2, 3, 4, 5, -6.5}));
  EXPECT_EQ(file.values(*file.find("b.c")), (std::vector<double>{0.25}));
  EXPECT_EQ(file.find("missing"), nullptr);
}

TEST(Safetensors, HeaderIsPaddedToEightBytes) {
  const auto bytes = serialize_safetensors({{"x", {1}, {1.0f}}});
  std::uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  EXPECT_EQ(length % 8, 0u);
}

TEST(Safetensors, DecodesHalfAndBfloat16Exactly) {
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);  // largest finite half
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);  // smallest subnormal
  EXPECT_TRUE(std::isinf(half_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00)));
  EXPECT_EQ(bfloat16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bfloat16_to_float(0xc2f7), -123.5f);
  // Through the file reader: an F16 [2] and a BF16 [1] tensor.
  std::string data;
  for (std::uint16_t bits : {std::uint16_t{0x3c00}, std::uint16_t{0x3800}, std::uint16_t{0x4049}}) {
    data.append(reinterpret_cast<const char*>(&bits), 2);
  }
  const auto file =
      SafetensorsFile::parse(make_file(R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
                                       R"("b":{"dtype":"BF16","shape":[1],"data_offsets":[4,6]}})",
                                       data),
                             "mixed");
  EXPECT_EQ(file.values(*file.find("h")), (std::vector<double>{1.0, 0.5}));
  EXPECT_EQ(file.values(*file.find("b")), (std::vector<double>{3.140625}));
}

TEST(Safetensors, RejectsTruncatedHeaderLength) {
  expect_rejected("abc", "truncated");
}

TEST(Safetensors, RejectsHugeHeaderLength) {
  std::string bytes(16, '\0');
  const std::uint64_t length = 1ull << 40;
  std::memcpy(bytes.data(), &length, 8);
  expect_rejected(bytes, "exceeds the limit");
}

TEST(Safetensors, RejectsHeaderLongerThanTheFile) {
  std::string bytes = make_file(R"({"a":1})");
  bytes.resize(bytes.size() - 3);
  expect_rejected(bytes, "truncated");
}

TEST(Safetensors, RejectsInvalidJson) {
  expect_rejected(make_file("{not json"), "not valid JSON");
}

TEST(Safetensors, RejectsNumbersThatOverflowInTheHeader) {
  // Fuzzing found this: nlohmann/json reports it as out_of_range, not parse_error.
  expect_rejected(
      make_file(R"({"t":{"dtype":"F32","shape":[11111e1131111110],"data_offsets":[0,4]}})"),
      "not valid JSON");
}

TEST(Safetensors, RejectsNonObjectHeader) {
  expect_rejected(make_file("[1,2]"), "JSON object");
}

TEST(Safetensors, RejectsUnknownDtype) {
  expect_rejected(make_file(R"({"t":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", "x"),
                  "unsupported dtype 'Q4'");
}

TEST(Safetensors, RejectsShapeThatDisagreesWithTheByteRange) {
  expect_rejected(
      make_file(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')),
      "needs 12");
}

TEST(Safetensors, RejectsRangePastTheEndOfTheData) {
  expect_rejected(
      make_file(R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", std::string(8, '\0')),
      "runs past the end");
}

TEST(Safetensors, RejectsOverlappingTensors) {
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                            std::string(12, '\0')),
                  "overlap");
}

TEST(Safetensors, RejectsDuplicateNames) {
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                            R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                            std::string(8, '\0')),
                  "duplicate tensor name 'a'");
}

TEST(Safetensors, RejectsReversedOffsetsNegativeShapesAndMissingFields) {
  expect_rejected(
      make_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", std::string(8, '\0')),
      "< begin");
  expect_rejected(
      make_file(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", std::string(4, '\0')),
      "non-negative integer");
  expect_rejected(make_file(R"({"t":{"dtype":"F32","shape":[1]}})"), "missing 'data_offsets'");
}

TEST(Safetensors, RejectsShapesWhoseSizeOverflows) {
  expect_rejected(
      make_file(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})",
                std::string(4, '\0')),
      "overflows");
}

// A header of `count` one-element F32 tensors t0, t1, ... at consecutive offsets.
std::string many_entries_header(int count, const std::string& last_entry = "") {
  std::string header = "{";
  for (int i = 0; i < count; ++i) {
    header += "\"t" + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" +
              std::to_string(4 * i) + "," + std::to_string(4 * i + 4) + "]},";
  }
  header += last_entry.empty() ? std::string("\"__metadata__\":{}") : last_entry;
  return header + "}";
}

// 50,000 entries: the checks are n log n (they took minutes when quadratic); this test checks
// what they find, the time is in the report of issue 24.
TEST(Safetensors, ManyEntriesAreValidatedAndFound) {
  constexpr int kCount = 50'000;
  const std::string data(4 * kCount, '\0');
  const SafetensorsFile file =
      SafetensorsFile::parse(make_file(many_entries_header(kCount), data), "many.safetensors");
  ASSERT_EQ(file.tensors().size(), static_cast<std::size_t>(kCount));
  for (int i = 0; i < kCount; i += 997) {
    std::string name = "t";  // appended, not "t" + ...: GCC 12 warns falsely on the latter
    name += std::to_string(i);
    const TensorInfo* info = file.find(name);
    ASSERT_NE(info, nullptr) << i;
    EXPECT_EQ(info->begin, static_cast<std::uint64_t>(4 * i));
  }
  EXPECT_EQ(file.find("t50000"), nullptr);
  EXPECT_EQ(file.find(""), nullptr);
  // A duplicate name after 50,000 others, and an overlap of the last entry with the first.
  expect_rejected(
      make_file(
          many_entries_header(kCount, R"("t17":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})"),
          data),
      "duplicate tensor name 't17'");
  expect_rejected(
      make_file(many_entries_header(
                    kCount, R"("z":{"dtype":"F32","shape":[2],"data_offsets":[199990,199998]})"),
                data),
      "overlap in the data section");
}

TEST(Safetensors, OverlapsAreFoundWhereverTheyAre) {
  // b lies inside a; c starts where a ends: only (a, b) overlap, whatever the header order.
  expect_rejected(make_file(R"({"c":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},)"
                            R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                            std::string(20, '\0')),
                  "tensors 'a' and 'b' overlap");
  EXPECT_NO_THROW(
      SafetensorsFile::parse(make_file(R"({"c":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},)"
                                       R"("e":{"dtype":"F32","shape":[0],"data_offsets":[16,16]},)"
                                       R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                                       std::string(20, '\0')),
                             "ok.safetensors"));
}

TEST(Safetensors, ReadHeaderValidatesAgainstTheFileSizeBeforeReadingData) {
  test::TempDir dir;
  // The header declares 16 bytes of data; the file holds 8.
  const std::filesystem::path path = dir / "short.safetensors";
  write_file_atomically(path,
                        make_file(R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                                  std::string(8, '\0')));
  try {
    SafetensorsFile::read_header(path);
    ADD_FAILURE() << "a header whose ranges run past the file was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("runs past the end"), std::string::npos)
        << error.what();
  }
  // A good file: the header alone gives names and shapes; values need load_data.
  write_safetensors(dir / "ok.safetensors", {{"x", {2}, {1.0f, 2.0f}}});
  SafetensorsFile file = SafetensorsFile::read_header(dir / "ok.safetensors");
  ASSERT_NE(file.find("x"), nullptr);
  EXPECT_EQ(file.find("x")->shape, std::vector<std::int64_t>{2});
  EXPECT_THROW(file.values(*file.find("x")), Error);
  file.load_data();
  EXPECT_EQ(file.values(*file.find("x")), (std::vector<double>{1.0, 2.0}));
}

TEST(Safetensors, ReadNamesAMissingFile) {
  try {
    SafetensorsFile::read("/nonexistent/dir/model.safetensors");
    ADD_FAILURE();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("/nonexistent/dir/model.safetensors"),
              std::string::npos);
  }
}

TEST(Safetensors, WriteIsAtomicAndLeavesNoTemporaryFile) {
  test::TempDir dir;
  write_safetensors(dir / "x.safetensors", {{"x", {2}, {1.0f, 2.0f}}});
  write_safetensors(dir / "x.safetensors", {{"y", {1}, {3.0f}}});  // replaces the file whole
  const auto file = SafetensorsFile::read(dir / "x.safetensors");
  EXPECT_NE(file.find("y"), nullptr);
  EXPECT_EQ(file.find("x"), nullptr);
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path()))
    ++entries;
  EXPECT_EQ(entries, 1);
  // Writing into a missing directory fails with the path and leaves nothing behind.
  EXPECT_THROW(write_safetensors(dir / "no/such/dir.safetensors", {{"x", {1}, {1.0f}}}), Error);
}

}  // namespace test_safetensors
}  // namespace attnres

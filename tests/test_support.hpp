// Helpers shared by every test suite, the base library's included: temporary directories and the
// message of an expected error. The model's helpers (test shapes, random weights, tensor
// comparison) are in model_support.hpp.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>

#include "attnres/error.hpp"

#if defined(__has_feature)  // clang
#if __has_feature(address_sanitizer)
#define ATTNRES_TEST_ASAN 1
#endif
#endif

namespace attnres::test {

// Whether this test program runs under AddressSanitizer (the asan preset).
#if defined(__SANITIZE_ADDRESS__) || defined(ATTNRES_TEST_ASAN)  // GCC, clang
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

// Bounds on floating-point differences (docs/testing.md §2). A bound is a stated number of unit
// roundoffs u of the arithmetic that made the values, relative to a stated magnitude: that of the
// values compared, or of the terms a sum was made of. Never a bare absolute constant: a constant
// that passes on one CPU's kernels fails on another's, whose products and sums run in another
// order (issue 41: 1.65e-12 against 1e-12 on an AVX2-only EPYC).
//
//   EXPECT_TRUE(test::near_relative(got, want, test::roundoffs<double>(64)));      // 64 u of f64
//   test::expect_tensor_near("logits", fast, reference, test::roundoffs<float>(512));
//
// u: 2^-53 in double, 2^-24 in float; 2^-8 for a bf16 operand (kBf16UnitRoundoff).
template <typename T>
inline constexpr double kUnitRoundoff = std::numeric_limits<T>::epsilon() / 2;
inline constexpr double kBf16UnitRoundoff = 1.0 / 256;

// `units` unit roundoffs of T: a relative bound.
template <typename T>
constexpr double roundoffs(double units) {
  return units * kUnitRoundoff<T>;
}

// Every comparison made through these helpers appends "name relative-difference bound" to the
// file ATTNRES_TEST_BOUNDS_LOG names, when it is set: how close each comparison comes to its
// bound on this machine (docs/testing.md §2 says how to read it when a new kind of CPU arrives).
inline void log_bound(const std::string& name, double difference, double bound) {
  static const char* path = std::getenv("ATTNRES_TEST_BOUNDS_LOG");
  if (!path || !*path) return;
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::ofstream log(path, std::ios::app);
  log.precision(9);
  log << (test ? std::string(test->test_suite_name()) + "." + test->name() : std::string("?"))
      << "\t" << name << "\t" << difference << "\t" << bound << "\n";
}

// |actual - expected| <= relative x max(|expected|, scale): `scale` is the magnitude the rounding
// is relative to when it is not the value's own (the sum of |terms| of a sum that cancels).
inline ::testing::AssertionResult near_relative(double actual, double expected, double relative,
                                                double scale = 0.0,
                                                const std::string& name = "value") {
  const double magnitude = std::max(std::abs(expected), scale);
  const double difference = std::abs(actual - expected);
  log_bound(name, magnitude > 0 ? difference / magnitude : difference, relative);
  if (difference <= relative * magnitude) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << name << ": " << actual << " vs " << expected << " differ by " << difference << " = "
         << difference / magnitude << " of the magnitude " << magnitude << ", bound " << relative
         << " (" << relative / kUnitRoundoff<double> << " u of f64, "
         << relative / kUnitRoundoff<float> << " u of f32)";
}

// The message of the attnres::Error that `run()` throws. A run that throws none is a test failure
// (and gives ""), so a check on the message cannot pass by the error going missing.
template <typename Run>
std::string error_message(Run&& run) {
  try {
    run();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected an attnres::Error; none was thrown";
  return "";
}

// A fresh directory under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::random_device entropy;
    path_ = std::filesystem::temp_directory_path() /
            ("attnres-test-" + std::to_string(entropy()) + std::to_string(entropy()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace attnres::test

// Helpers shared by every test suite, the base library's included: temporary directories and the
// message of an expected error. The model's helpers (test shapes, random weights, tensor
// comparison) are in model_support.hpp.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
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

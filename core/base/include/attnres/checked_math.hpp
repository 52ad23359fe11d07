// 64-bit integer arithmetic that refuses to overflow: the cost engine multiplies user-supplied
// sizes (L, T, d, B, ...) and must reject what it cannot represent instead of wrapping.
#pragma once

#include <cstdint>
#include <string>

#include "attnres/error.hpp"

namespace attnres {

inline std::int64_t checked_multiply(std::int64_t a, std::int64_t b, const std::string& what) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    throw Error(what + ": the product " + std::to_string(a) + " x " + std::to_string(b) +
                " overflows 64-bit integers");
  }
  return out;
}

inline std::int64_t checked_add(std::int64_t a, std::int64_t b, const std::string& what) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    throw Error(what + ": the sum " + std::to_string(a) + " + " + std::to_string(b) +
                " overflows 64-bit integers");
  }
  return out;
}

}  // namespace attnres

// Our own invariants (README, Contributing): ATTNRES_ASSERT(cond, message) checks something the
// library itself guarantees — never a user's input, which is an attnres::Error naming the file or
// flag. It is active in every build type, Release included, so only cheap checks belong here (no
// asserts inside the engines' fast kernels). A failure throws attnres::InternalError, which is not
// an attnres::Error: the CLI reports it as "internal error: FILE:LINE: ..." and exits non-zero, the
// GUI shows it, tests and fuzzers see an unexpected exception.
//
//   ATTNRES_ASSERT(std::abs(sum - 1.0) < 1e-9, "softmax weights of a read sum to 1");
#pragma once

#include <stdexcept>
#include <string>

namespace attnres {

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message) : std::logic_error(message) {}
};

// "FILE:LINE: assertion 'CONDITION' failed: MESSAGE", thrown as InternalError.
[[noreturn]] void assertion_failed(const char* file, int line, const char* condition,
                                   const std::string& message);

}  // namespace attnres

#define ATTNRES_ASSERT(condition, message)                                                    \
  do {                                                                                        \
    if (!(condition)) ::attnres::assertion_failed(__FILE__, __LINE__, #condition, (message)); \
  } while (false)

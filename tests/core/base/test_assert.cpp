// ATTNRES_ASSERT (attnres/assert.hpp): our own invariants, checked in every build type.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "attnres/assert.hpp"
#include "attnres/error.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_assert {

TEST(Assert, PassingConditionDoesNothing) {
  EXPECT_NO_THROW(ATTNRES_ASSERT(1 + 1 == 2, "arithmetic"));
}

TEST(Assert, FailureNamesFileLineConditionAndMessage) {
  const int line = __LINE__ + 2;
  try {
    ATTNRES_ASSERT(1 + 1 == 3, "arithmetic holds");
    ADD_FAILURE() << "no InternalError";
  } catch (const InternalError& error) {
    EXPECT_EQ(std::string(error.what()), std::string(__FILE__) + ":" + std::to_string(line) +
                                             ": assertion '1 + 1 == 3' failed: arithmetic holds");
  }
}

TEST(Assert, InternalErrorIsNotAUserError) {
  // The CLI reports attnres::Error as the user's mistake and anything else as an internal error.
  EXPECT_THROW(ATTNRES_ASSERT(false, ""), std::logic_error);
  try {
    ATTNRES_ASSERT(false, "");
  } catch (const Error&) {
    ADD_FAILURE() << "an assertion must not look like a user error";
  } catch (const InternalError& error) {
    EXPECT_EQ(std::string(error.what()).find("failed:"), std::string::npos);  // no empty message
  }
}

}  // namespace test_assert
}  // namespace attnres

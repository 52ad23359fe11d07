#include "attnres/assert.hpp"

namespace attnres {

void assertion_failed(const char* file, int line, const char* condition,
                      const std::string& message) {
  // Appended piece by piece: GCC 12 reports a false -Wrestrict on "literal" + std::string.
  std::string text = file;
  text += ':';
  text += std::to_string(line);
  text += ": assertion '";
  text += condition;
  text += "' failed";
  if (!message.empty()) {
    text += ": ";
    text += message;
  }
  throw InternalError(text);
}

}  // namespace attnres

// Errors for anything a user supplied (model files, flags, token lists).
//
// Programmer misuse inside the library is an assertion; a problem with user input is an
// attnres::Error whose message names the file (or flag) and says what was expected. Library code
// never calls exit(): the CLI and the GUI catch Error and present the message.
#pragma once

#include <stdexcept>
#include <string>

namespace attnres {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace attnres

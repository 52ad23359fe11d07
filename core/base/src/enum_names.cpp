#include "attnres/enum_names.hpp"

#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/quoted_text.hpp"

namespace attnres {

std::string name_list(const std::vector<std::string>& names) {
  std::string list;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) list += i + 1 == names.size() ? " or " : ", ";
    list += names[i];
  }
  return list;
}

void throw_unknown_name(const std::string& text, const std::string& where, const std::string& what,
                        const std::vector<std::string>& names) {
  const std::string hint = did_you_mean(text, names);
  std::string message = where + ": " + what + " '" + quoted_text(text) + "' (";
  if (!hint.empty()) message += "did you mean '" + hint + "'? ";
  message += "expected " + name_list(names) + ")";
  throw Error(message);
}

}  // namespace attnres

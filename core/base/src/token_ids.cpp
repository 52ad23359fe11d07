#include "attnres/token_ids.hpp"

#include <charconv>

#include "attnres/error.hpp"
#include "attnres/format.hpp"

namespace attnres {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

}  // namespace

std::vector<int> parse_token_ids(const std::string& text, const std::string& field,
                                 std::optional<int> vocab_size) {
  const std::string expected = "; expected non-negative integers separated by spaces or commas";
  std::vector<int> ids;
  std::size_t position = 0;
  int index = 0;
  bool after_comma = true;  // a comma with no id before it ("1,,2", ",1") is an empty id
  while (position < text.size()) {
    const char c = text[position];
    if (c == ',') {
      if (after_comma) {
        throw Error(field + ": empty token id (token " + std::to_string(index) + ") in '" +
                    printable_text(text) + "'" + expected);
      }
      after_comma = true;
      ++position;
      continue;
    }
    if (is_space(c)) {
      ++position;
      continue;
    }
    after_comma = false;
    std::size_t end = position;
    while (end < text.size() && text[end] != ',' && !is_space(text[end])) ++end;
    const std::string word = text.substr(position, end - position);
    int value = 0;
    const auto [ptr, error] = std::from_chars(word.data(), word.data() + word.size(), value);
    if (error != std::errc() || ptr != word.data() + word.size() || value < 0) {
      throw Error(field + ": '" + printable_text(word) + "' (token " + std::to_string(index) +
                  ") is not a token id" + expected);
    }
    if (vocab_size && value >= *vocab_size) {
      throw Error(field + ": '" + word + "' (token " + std::to_string(index) +
                  ") is not a token id in 0 .. " + std::to_string(*vocab_size - 1) +
                  " (the model's vocabulary)");
    }
    ids.push_back(value);
    ++index;
    position = end;
  }
  if (ids.empty()) throw Error(field + ": no token ids given" + expected);
  if (after_comma && text.find(',') != std::string::npos) {
    throw Error(field + ": '" + printable_text(text) + "' ends with a comma (an empty token id)");
  }
  return ids;
}

}  // namespace attnres

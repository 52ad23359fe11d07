// Token ids typed by a person: the CLI's --tokens and the GUI's tokens field read them here.
//
//   parse_token_ids("1 7, 42", "--tokens")        -> {1, 7, 42}
//   parse_token_ids("1 7 300", "tokens", 256)     -> Error "tokens: '300' (token 2) is not a token
//   id in 0 .. 255"
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace attnres {

// Non-negative integers separated by spaces, tabs, newlines or commas ("1 2 3", "1,2,3", "1, 2,
// 3"). With `vocab_size`, every id must also be below it. Throws attnres::Error whose message
// starts with `field` ("--tokens: ...") on an empty list, an empty id between commas, a trailing
// comma, a word that is not an id, or an id outside the vocabulary.
std::vector<int> parse_token_ids(const std::string& text, const std::string& field,
                                 std::optional<int> vocab_size = std::nullopt);

}  // namespace attnres

// Text from the user or a file quoted in a message, bounded: a 10 MB unknown key or flag is not
// echoed whole to the terminal.
#pragma once

#include <cstddef>
#include <string>

namespace attnres {

// The most characters of one quoted text a message shows.
inline constexpr std::size_t kMaxQuotedBytes = 80;

// printable_text(text) when text has at most `limit` bytes; else its first `limit` bytes (cut on a
// UTF-8 character boundary), made printable, followed by "… (N bytes)".
std::string quoted_text(const std::string& text, std::size_t limit = kMaxQuotedBytes);

}  // namespace attnres

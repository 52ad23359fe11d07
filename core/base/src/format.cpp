#include "attnres/format.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>

#include "attnres/quoted_text.hpp"

namespace attnres {

std::string format_number(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::abs(value) < 1e15) {
    std::ostringstream out;
    out << static_cast<long long>(value);
    return out.str();
  }
  std::ostringstream out;
  out.precision(6);
  out << value;
  return out.str();
}

std::string format_signed_bound(double value, int decimals) {
  if (std::isnan(value)) return "-";
  if (value == 0) value = 0.0;  // -0.0 prints as +0.000
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%+.*f", decimals, value);
  const std::string text = buffer;
  if (value == 0 || !std::isfinite(value) || text.find_first_of("123456789") != std::string::npos) {
    return text;
  }
  // Rounds to zero at `decimals`: as many decimals as two significant digits need, or, past 8
  // decimals, the exponent form.
  const int exponent = static_cast<int>(std::floor(std::log10(std::abs(value))));
  const int needed = 1 - exponent;
  if (needed <= 8) {
    std::snprintf(buffer, sizeof buffer, "%+.*f", needed, value);
  } else {
    std::snprintf(buffer, sizeof buffer, "%+.1e", value);
  }
  return buffer;
}

}  // namespace attnres

namespace attnres {

namespace {

// Length of the valid UTF-8 sequence starting at text[i] (0 when invalid): shortest forms only,
// no surrogates, at most U+10FFFF.
std::size_t utf8_sequence_length(const std::string& text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  std::size_t length = 0;
  std::uint32_t code = 0;
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code = lead & 0x1Fu;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code = lead & 0x0Fu;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code = lead & 0x07u;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0u) != 0x80u) return 0;
    code = (code << 6) | (byte(i + k) & 0x3Fu);
  }
  if ((length == 3 && code < 0x800) || (length == 4 && (code < 0x10000 || code > 0x10FFFF)))
    return 0;
  if (code >= 0xD800 && code <= 0xDFFF) return 0;
  if (code >= 0x80 && code <= 0x9F) return 0;  // C1 controls
  return length;
}

}  // namespace

std::string text_position(const std::string& source, const std::string& text, std::size_t offset) {
  offset = std::min(offset, text.size());
  std::size_t line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return source + ":" + std::to_string(line) + ":" + std::to_string(offset - line_start + 1);
}

std::string printable_text(const std::string& text) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t length = utf8_sequence_length(text, i);
    const bool control = c < 0x80 && ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f);
    if (length == 0 || control) {
      out += "\\x";
      out += digits[c >> 4];
      out += digits[c & 0xF];
      ++i;
    } else {
      out.append(text, i, length);
      i += length;
    }
  }
  return out;
}

std::string quoted_text(const std::string& text, std::size_t limit) {
  if (text.size() <= limit) return printable_text(text);
  std::size_t end = 0;
  while (end < text.size()) {
    const std::size_t length = std::max<std::size_t>(utf8_sequence_length(text, end), 1);
    if (end + length > limit) break;
    end += length;
  }
  return printable_text(text.substr(0, end)) + "… (" + std::to_string(text.size()) + " bytes)";
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  auto lower = [](std::string text) {
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
  };
  // A word that is itself a candidate is not a typo: no "did you mean X" for X itself.
  if (std::find(candidates.begin(), candidates.end(), word) != candidates.end()) return "";
  const std::string folded = lower(word);
  const std::size_t accepted = std::max<std::size_t>(2, word.size() / 3);
  std::string best;
  std::size_t best_distance = SIZE_MAX;
  for (const auto& candidate : candidates) {
    // The distance is at least the difference of the lengths: a candidate that could not be
    // accepted is skipped (a 10 MB word costs no 10 MB x |candidate| table).
    const std::size_t gap = word.size() > candidate.size() ? word.size() - candidate.size()
                                                           : candidate.size() - word.size();
    if (gap > accepted) continue;
    // Case is compared last: "H100" -> "h100" (distance 0), not "a100".
    const std::size_t distance = edit_distance(folded, lower(candidate));
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best_distance <= accepted ? best : "";
}

}  // namespace attnres

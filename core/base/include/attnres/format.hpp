// Number and text formatting shared by tables, reports and messages.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace attnres {

// Integers exactly; other values to 6 significant digits.
std::string format_number(double value);

// A signed number with `decimals` decimals ("+0.057", "-0.009"), except that a value other than
// zero which would print as zero ("+0.000") gets two significant digits instead ("-0.00042",
// "+0.000030", "-4.2e-09"): an interval bound beside "resolved" must show which side of zero it
// lies on. NaN prints as "-".
std::string format_signed_bound(double value, int decimals);

// `text` made safe for a terminal or a log: valid UTF-8 sequences of printable characters are
// kept; every other byte (invalid UTF-8, control characters other than newline and tab, DEL,
// C1 controls) becomes "\xNN". Messages built from user files go through this before they are
// shown, so hostile bytes never reach the terminal raw.
std::string printable_text(const std::string& text);

// "SOURCE:LINE:COLUMN" of byte `offset` (0-based) of `text` (1-based line and column, counted in
// bytes), for errors in JSON files (config.json, a shard index).
std::string text_position(const std::string& source, const std::string& text, std::size_t offset);

// Edit distance, for "did you mean" suggestions.
std::size_t edit_distance(const std::string& a, const std::string& b);
// The candidate closest to `word` (compared without case) if it is close enough to be a likely
// typo, else "" (also when `word` is itself a candidate).
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace attnres

// One table per enum of the names that files, flags and reports use for its values: to_string and
// parse_* of every enum are this table read one way or the other, so a name is written once.
//
//   inline constexpr EnumNames<CachePolicy, 3> kCachePolicyNames{
//       {{CachePolicy::naive, "naive"}, {CachePolicy::cached, "cached"}, {CachePolicy::cached_own,
//       "cached_own"}}};
//   enum_name(kCachePolicyNames, CachePolicy::cached);                        // "cached"
//   parse_enum(kCachePolicyNames, "cahced", "--cache", "unknown cache policy");
//   // throws attnres::Error: "--cache: unknown cache policy 'cahced' (did you mean 'cached'?
//   expected
//   //                         naive, cached or cached_own)"
//
// The table's order is the order the names are listed in messages.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnres/assert.hpp"

namespace attnres {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

template <typename E, std::size_t N>
using EnumNames = std::array<EnumName<E>, N>;

// The name of `value`; every value has one (a table that misses one is our bug, an assertion).
template <typename E, std::size_t N>
std::string enum_name(const EnumNames<E, N>& table, E value) {
  const auto entry =
      std::find_if(table.begin(), table.end(), [value](const auto& e) { return e.value == value; });
  ATTNRES_ASSERT(entry != table.end(), "every value has a name (value " +
                                           std::to_string(static_cast<long long>(value)) +
                                           " has none)");
  return std::string(entry->name);
}

// The value named `name` exactly (case matters), if any.
template <typename E, std::size_t N>
constexpr std::optional<E> find_enum(const EnumNames<E, N>& table, std::string_view name) {
  for (const auto& entry : table) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

template <typename E, std::size_t N>
std::vector<std::string> enum_names(const EnumNames<E, N>& table) {
  std::vector<std::string> names;
  for (const auto& entry : table) names.emplace_back(entry.name);
  return names;
}

// "a", "a or b", "a, b or c".
std::string name_list(const std::vector<std::string>& names);

// Throws attnres::Error "WHERE: WHAT 'TEXT' (expected a, b or c)", with "did you mean 'x'? " before
// "expected" when a name is close to TEXT. WHAT says what was wrong: "unknown cache policy".
[[noreturn]] void throw_unknown_name(const std::string& text, const std::string& where,
                                     const std::string& what,
                                     const std::vector<std::string>& names);

// The value named `text`, or the error of throw_unknown_name.
template <typename E, std::size_t N>
E parse_enum(const EnumNames<E, N>& table, const std::string& text, const std::string& where,
             const std::string& what) {
  if (const auto value = find_enum(table, text)) return *value;
  throw_unknown_name(text, where, what, enum_names(table));
}

}  // namespace attnres

// The one typed TOML reader (internal: for the cost library and the report layer, not for app/):
// scenario files and hardware presets both read through it, so every error has the same form,
// "file:line:column: what was expected".
//
// A node's location is its own file's: toml++ records the file a node was parsed from, so when a
// scenario's [hardware] table overrides a preset, an error in an overriding key points into the
// scenario and an error in the preset's own key points into the preset ("preset h100:3:1").
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attnres::detail {

class TomlReader {
 public:
  explicit TomlReader(std::string source) : source_(std::move(source)) {}
  const std::string& source() const { return source_; }

  // Parses `text`; a syntax error is reported at its line and column.
  toml::table parse(const std::string& text) const;
  // "file:line:column" of a region: the file it was parsed from, else this reader's source.
  std::string location(const toml::source_region& where) const;
  [[noreturn]] void fail(const toml::source_region& where, const std::string& message) const;

  // Unknown keys are errors with a did-you-mean suggestion and the list of keys expected.
  void check_keys(const toml::table& table, const std::string& prefix,
                  const std::vector<std::string>& allowed) const;
  // A sub-table, or nullptr when absent; anything else under `key` is an error.
  const toml::table* table(const toml::table& parent, const char* key) const;

  std::int64_t integer(const toml::node& node, const std::string& name) const;
  double number(const toml::node& node, const std::string& name) const;  // integer or float
  std::string string(const toml::node& node, const std::string& name) const;
  bool boolean(const toml::node& node, const std::string& name) const;
  static std::string type_name(const toml::node& node);  // "an integer", "a table", ...

 private:
  std::string source_;
};

}  // namespace attnres::detail

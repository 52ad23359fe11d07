#include "attnres/toml_reader.hpp"

#include <algorithm>

#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/quoted_text.hpp"

namespace attnres::detail {

using attnres::did_you_mean;

toml::table TomlReader::parse(const std::string& text) const {
  try {
    return toml::parse(text, source_);
  } catch (const toml::parse_error& error) {
    throw Error(location(error.source()) +
                ": TOML syntax error: " + std::string(error.description()));
  }
}

std::string TomlReader::location(const toml::source_region& where) const {
  const std::string& file = where.path && !where.path->empty() ? *where.path : source_;
  return file + ":" + std::to_string(where.begin.line) + ":" + std::to_string(where.begin.column);
}

void TomlReader::fail(const toml::source_region& where, const std::string& message) const {
  throw Error(location(where) + ": " + message);
}

void TomlReader::check_keys(const toml::table& table, const std::string& prefix,
                            const std::vector<std::string>& allowed) const {
  for (auto&& [key, node] : table) {
    const std::string name(key.str());
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      const std::string hint = did_you_mean(name, allowed);
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      fail(key.source(), "unknown key '" + quoted_text(prefix + name) + "'" +
                             (hint.empty() ? "" : " (did you mean '" + prefix + hint + "'?)") +
                             "; expected one of: " + list);
    }
  }
}

const toml::table* TomlReader::table(const toml::table& parent, const char* key) const {
  const toml::node* node = parent.get(key);
  if (!node) return nullptr;
  if (!node->is_table()) fail(node->source(), std::string(key) + " must be a table [" + key + "]");
  return node->as_table();
}

std::int64_t TomlReader::integer(const toml::node& node, const std::string& name) const {
  if (!node.is_integer()) fail(node.source(), name + " must be an integer, got " + type_name(node));
  return node.as_integer()->get();
}

double TomlReader::number(const toml::node& node, const std::string& name) const {
  if (node.is_integer()) return static_cast<double>(node.as_integer()->get());
  if (!node.is_floating_point())
    fail(node.source(), name + " must be a number, got " + type_name(node));
  return node.as_floating_point()->get();
}

std::string TomlReader::string(const toml::node& node, const std::string& name) const {
  if (!node.is_string()) fail(node.source(), name + " must be a string, got " + type_name(node));
  return node.as_string()->get();
}

bool TomlReader::boolean(const toml::node& node, const std::string& name) const {
  if (!node.is_boolean())
    fail(node.source(), name + " must be true or false, got " + type_name(node));
  return node.as_boolean()->get();
}

std::string TomlReader::type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date/time";
  }
}

}  // namespace attnres::detail

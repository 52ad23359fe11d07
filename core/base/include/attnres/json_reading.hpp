// Reading documents that may be hostile: bounded in size, in depth and in what their errors quote
// (docs/output-safety.md, "Reading files").
//
//   const std::string text = read_document(dir / "config.json", "a config.json file");
//   const nlohmann::json root = parse_json_document(text, (dir / "config.json").string());
//   ... throw Error(source + ": hidden_act must be a string, got " + describe_json(value));
//
// read_document refuses a file larger than its cap by name, before reading it: the size comes
// from fstat on the opened descriptor, and at most cap + 1 bytes are ever read (a file that grows
// while it is read, or a sparse one, cannot take more memory than the cap). parse_json_document
// parses JSON in one linear pass that never recurses: nesting deeper than a limit and a key that
// appears twice in one object are refused with the file's line and column; a syntax error too.
// describe_json renders an untrusted value for a message: at most a few dozen characters, never
// deeper than a few levels, every byte printable (nlohmann's dump() recurses and is unbounded).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace attnres {

// The most a JSON or TOML document may hold: config.json, train_state.json, scenario and hardware
// files. Real ones are a few kilobytes.
inline constexpr std::uint64_t kMaxDocumentBytes = std::uint64_t{16} << 20;
// The most a shard index (model.safetensors.index.json) may hold: the largest public MoE indexes
// (about 90,000 to 140,000 tensors) take 9 to 15 MB.
inline constexpr std::uint64_t kMaxShardIndexBytes = std::uint64_t{64} << 20;
// How deep a JSON document may nest (an object or array inside another counts one level).
inline constexpr std::size_t kMaxJsonDepth = 64;
// How many characters describe_json writes at most (then "...").
inline constexpr std::size_t kJsonQuoteChars = 80;

// Reads the regular file `path` whole, refusing it when it holds more than `max_bytes`: the
// message names the file, its size and the cap. `expected` says what the file should be ("a
// config.json file") and appears when `path` is a directory or a device. Throws attnres::Error.
std::string read_document(const std::filesystem::path& path, std::string_view expected,
                          std::uint64_t max_bytes = kMaxDocumentBytes);

struct JsonReadOptions {
  std::size_t max_depth = kMaxJsonDepth;
  // What a key of the top-level object is called in the duplicate message ("tensor name").
  std::string top_level_key_name = "key";
};

// Parses `text` (the contents of `source`, which errors name) as one JSON value. Throws
// attnres::Error "SOURCE:LINE:COLUMN: ..." for a syntax error, a number out of range, nesting
// deeper than options.max_depth, and a key that appears twice in one object (the position of
// the second, and the key, printable and shortened).
nlohmann::json parse_json_document(const std::string& text, const std::string& source,
                                   const JsonReadOptions& options = {});

// `value` for an error message: scalars as JSON ("\"gelu\"", 12, true); arrays and objects as
// compact JSON up to `max_chars` characters and three levels, then "..." (never a full dump);
// every byte that is not printable UTF-8 as \xNN.
std::string describe_json(const nlohmann::json& value, std::size_t max_chars = kJsonQuoteChars);

// `text` (a key, a tensor name from a file) for a message: printable, at most `max_chars`
// characters, then "...".
std::string quote_untrusted(const std::string& text, std::size_t max_chars = kJsonQuoteChars);

}  // namespace attnres

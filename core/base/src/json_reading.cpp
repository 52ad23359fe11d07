#include "attnres/json_reading.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <istream>
#include <streambuf>
#include <vector>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"

namespace attnres {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// "16 MiB (16777216 bytes)", or "N bytes" below a MiB.
std::string byte_cap_text(std::uint64_t bytes) {
  if (bytes >= (std::uint64_t{1} << 20) && bytes % (std::uint64_t{1} << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB (" + std::to_string(bytes) + " bytes)";
  return std::to_string(bytes) + " bytes";
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string read_document(const fs::path& path, std::string_view expected,
                          std::uint64_t max_bytes) {
  const std::string name = path.string();
  const std::string expected_text =
      expected.empty() ? std::string() : ", expected " + std::string(expected);
  if (const std::string what = not_a_regular_file(path); !what.empty()) {
    throw Error("cannot read '" + name + "': " + what +
                (what == "no such file" ? std::string() : expected_text));
  }
  // O_NONBLOCK: a FIFO put in the file's place after the check above must not block the open.
  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) throw Error("cannot read '" + name + "': " + std::strerror(errno));
  struct stat status {};
  if (::fstat(fd.get(), &status) != 0)
    throw Error("cannot read '" + name + "': " + std::strerror(errno));
  if (!S_ISREG(status.st_mode))
    throw Error("cannot read '" + name + "': is not a regular file" + expected_text);
  const std::string limit = "more than the " + byte_cap_text(max_bytes) + " accepted for " +
                            (expected.empty() ? std::string("this file") : std::string(expected)) +
                            "; refused without reading it";
  const auto size = static_cast<std::uint64_t>(std::max<off_t>(status.st_size, 0));
  if (size > max_bytes)
    throw Error(name + ": the file holds " + std::to_string(size) + " bytes, " + limit);
  // At most max_bytes + 1 bytes are read: a file that grows meanwhile is refused at the cap.
  std::string out;
  out.reserve(static_cast<std::size_t>(size));
  std::vector<char> chunk(std::size_t{1} << 16);
  for (;;) {
    const std::uint64_t room = max_bytes + 1 - out.size();
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), room));
    const ssize_t got = ::read(fd.get(), chunk.data(), want);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw Error("cannot read '" + name + "': " + std::strerror(errno));
    }
    if (got == 0) break;
    out.append(chunk.data(), static_cast<std::size_t>(got));
    if (out.size() > max_bytes)
      throw Error(name + ": the file grew while it was read, to " + limit);
  }
  return out;
}

std::string quote_untrusted(const std::string& text, std::size_t max_chars) {
  if (text.size() <= max_chars) return printable_text(text);
  std::size_t cut = max_chars;
  // Not inside a UTF-8 sequence: back up over continuation bytes.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0u) == 0x80u) --cut;
  return printable_text(text.substr(0, cut)) + "...";
}

namespace {

constexpr std::size_t kDescribeDepth = 3;

// Compact JSON of `value` into `out`, stopping once `out` holds more than `budget` bytes; arrays
// and objects below `depth` levels are written "[...]" / "{...}". Recursion is bounded by
// kDescribeDepth, whatever the value's own depth.
void describe_into(const json& value, std::size_t depth, std::size_t budget, std::string& out) {
  if (out.size() > budget) return;
  if (value.is_array() || value.is_object()) {
    const bool array = value.is_array();
    if (value.empty()) {
      out += array ? "[]" : "{}";
      return;
    }
    if (depth >= kDescribeDepth) {
      out += array ? "[...]" : "{...}";
      return;
    }
    out += array ? '[' : '{';
    bool first = true;
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (out.size() > budget) return;
      if (!first) out += ", ";
      first = false;
      if (!array) {
        out +=
            json(it.key().substr(0, budget)).dump(-1, ' ', false, json::error_handler_t::replace);
        out += ": ";
      }
      describe_into(*it, depth + 1, budget, out);
    }
    out += array ? ']' : '}';
    return;
  }
  if (value.is_string()) {
    // Only as much of a long string as could be shown.
    const auto& text = value.get_ref<const std::string&>();
    const json shown = text.size() > budget ? json(text.substr(0, budget + 1)) : value;
    out += shown.dump(-1, ' ', false, json::error_handler_t::replace);
    return;
  }
  out += value.dump(-1, ' ', false, json::error_handler_t::replace);  // a scalar: no recursion
}

}  // namespace

std::string describe_json(const json& value, std::size_t max_chars) {
  std::string out;
  describe_into(value, 0, max_chars, out);
  return quote_untrusted(out, max_chars);
}

namespace {

// The text as a stream whose position tells how far nlohmann's lexer has read: its tokens end
// there when a SAX event arrives (the lexer reads no further than the token it reports).
class TextBuffer : public std::streambuf {
 public:
  explicit TextBuffer(const std::string& text) {
    char* begin = const_cast<char*>(text.data());  // read only: the get area is never written
    setg(begin, begin, begin + text.size());
  }
  std::size_t consumed() const { return static_cast<std::size_t>(gptr() - eback()); }
};

// Builds the value like nlohmann's own DOM parser, refusing what it would accept: nesting deeper
// than the limit, a key twice in one object. The first problem ends the parse.
class BoundedBuilder : public json::json_sax_t {
 public:
  BoundedBuilder(json& root, const std::string& text, const std::string& source,
                 const JsonReadOptions& options, const TextBuffer& buffer)
      : root_(root), text_(text), source_(source), options_(options), buffer_(buffer) {}

  const std::string& error() const { return error_; }

  bool null() override { return put(nullptr) != nullptr; }
  bool boolean(bool value) override { return put(value) != nullptr; }
  bool number_integer(number_integer_t value) override { return put(value) != nullptr; }
  bool number_unsigned(number_unsigned_t value) override { return put(value) != nullptr; }
  bool number_float(number_float_t value, const string_t&) override {
    return put(value) != nullptr;
  }
  bool string(string_t& value) override { return put(std::move(value)) != nullptr; }
  bool binary(binary_t& value) override { return put(json::binary(std::move(value))) != nullptr; }

  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return stack_.pop_back(), true; }
  bool end_array() override { return stack_.pop_back(), true; }

  bool key(string_t& name) override {
    auto& object = stack_.back()->get_ref<json::object_t&>();
    auto [it, added] = object.try_emplace(std::move(name));  // not moved from when present
    if (!added) {
      const bool top = stack_.size() == 1;
      error_ = text_position(source_, text_, key_start()) + ": duplicate " +
               (top ? options_.top_level_key_name : std::string("key")) + " '" +
               quote_untrusted(name) + "' (a key may appear once in an object)";
      return false;
    }
    element_ = &it->second;
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& exception) override {
    error_ = text_position(source_, text_, position == 0 ? 0 : position - 1) +
             ": not valid JSON (" + printable_text(exception.what()) + ")";
    return false;
  }

 private:
  json& root_;
  const std::string& text_;
  const std::string& source_;
  const JsonReadOptions& options_;
  const TextBuffer& buffer_;
  std::vector<json*> stack_;  // the open arrays and objects, outermost first
  json* element_ = nullptr;   // where the value of the key just read goes
  std::string error_;

  // The byte the lexer read last (a bracket or a key's closing quote when an event arrives).
  std::size_t last_byte() const {
    const std::size_t consumed = buffer_.consumed();
    return consumed == 0 ? 0 : consumed - 1;
  }
  // The opening quote of the key whose closing quote was read last: the nearest quote before it
  // that no odd run of backslashes escapes (a JSON string holds no other quote).
  std::size_t key_start() const {
    std::size_t at = last_byte();
    while (at > 0) {
      --at;
      if (text_[at] != '"') continue;
      std::size_t slashes = 0;
      while (at > slashes && text_[at - 1 - slashes] == '\\') ++slashes;
      if (slashes % 2 == 0) return at;
    }
    return at;
  }

  template <typename Value>
  json* put(Value&& value) {
    if (stack_.empty()) {
      root_ = json(std::forward<Value>(value));
      return &root_;
    }
    json& parent = *stack_.back();
    if (parent.is_array()) {
      auto& array = parent.get_ref<json::array_t&>();
      array.emplace_back(std::forward<Value>(value));
      return &array.back();
    }
    *element_ = json(std::forward<Value>(value));
    return element_;
  }

  bool open(json empty) {
    if (stack_.size() >= options_.max_depth) {
      error_ = text_position(source_, text_, last_byte()) + ": JSON nested deeper than " +
               std::to_string(options_.max_depth) + " levels (refused; real files nest a few)";
      return false;
    }
    stack_.push_back(put(std::move(empty)));
    return true;
  }
};

}  // namespace

json parse_json_document(const std::string& text, const std::string& source,
                         const JsonReadOptions& options) {
  json root;
  TextBuffer buffer(text);
  std::istream stream(&buffer);
  BoundedBuilder builder(root, text, source, options, buffer);
  if (!json::sax_parse(stream, &builder)) {
    throw Error(builder.error().empty() ? source + ": not valid JSON" : builder.error());
  }
  return root;
}

}  // namespace attnres

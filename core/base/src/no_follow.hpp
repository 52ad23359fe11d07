// The no-follow walk below a directory that output directories use (output_dir.cpp;
// docs/output-safety.md, "Nothing outside the directory"). Private to attnres_base.
//
// Every path that a commit record, the marker or --force names is opened one folder at a time
// from the directory itself, with openat and O_NOFOLLOW: a symbolic link inside the directory is
// never followed, so attnres creates, moves and removes only entries that really are in it. A
// downloaded directory holding `lnk -> ~` and a crafted record naming `lnk/.bashrc` is refused,
// and nothing changes.

#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace attnres::no_follow {

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_;
};

// Throws std::filesystem::filesystem_error for `what` on `path` with errno `error`.
[[noreturn]] void throw_errno(const char* what, const std::string& path, int error);

// A path named by a record or the marker that leads through something other than a folder:
// `entry` is the part of `path` that is a link (or a file, a device...), `what` says which.
struct UnsafePath {
  std::string path, entry, what;
};

enum class Kind { missing, folder, file, link, other };

// What `name` in the folder `parent` is, without following a link.
Kind kind_at(int parent, const std::string& name, const std::string& path);
// "a symbolic link", "a file", ...
const char* kind_words(Kind kind);
// The folder `name` of `parent`, never through a link (ELOOP, ENOTDIR: filesystem_error).
Fd open_folder_at(int parent, const std::string& name, const std::string& path);
// The directory a command was given (as the user typed it: a link there is the user's choice).
Fd open_target(const std::filesystem::path& target);

// How place_of treats the folders on the way to an entry.
enum class Walk {
  check,   // look only: a missing folder ends the walk; a non-folder the commit replaces is fine
  open,    // a missing folder ends the walk (nothing there)
  create,  // a missing folder is made; a non-folder the commit replaces is replaced by one
};

// The folder that holds `relative` below `root` (opened folder by folder, never through a link)
// and the entry's name in it; `parent` is invalid when a folder on the way is missing (and not
// made). A link, a file or anything else on the way is an UnsafePath, unless it is in
// `replaceable` (the record removes it: --force replacing a foreign `tables` link with a
// report's tables/ folder).
struct Place {
  Fd parent;
  std::string name;
};
Place place_of(int root, const std::string& relative, Walk walk,
               const std::set<std::string>* replaceable = nullptr);

// Removes the entry `name` of `parent` and, when it is a folder, everything in it, never
// following a link (a link is removed, not what it points to).
void remove_tree_at(int parent, const std::string& name, const std::string& path);

// A bookkeeping file of the directory (the marker, the commit record): nullopt when there is
// none; refused (UnsafePath) when it is a link or not a plain file, or is larger than any attnres
// writes (16 MiB).
std::optional<std::string> read_bookkeeping(int root, const std::string& name);

}  // namespace attnres::no_follow

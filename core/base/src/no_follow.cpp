// The no-follow walk below a directory (no_follow.hpp; docs/output-safety.md, "Nothing outside
// the directory").
#include "no_follow.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <vector>

namespace attnres::no_follow {

namespace fs = std::filesystem;

[[noreturn]] void throw_errno(const char* what, const std::string& path, int error) {
  throw fs::filesystem_error(what, fs::path(path), std::error_code(error, std::generic_category()));
}

Kind kind_at(int parent, const std::string& name, const std::string& path) {
  struct stat st {};
  if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return Kind::missing;
    throw_errno("stat", path, errno);
  }
  if (S_ISDIR(st.st_mode)) return Kind::folder;
  if (S_ISREG(st.st_mode)) return Kind::file;
  if (S_ISLNK(st.st_mode)) return Kind::link;
  return Kind::other;
}

const char* kind_words(Kind kind) {
  switch (kind) {
    case Kind::link:
      return "a symbolic link";
    case Kind::file:
      return "a file";
    case Kind::folder:
      return "a folder";
    case Kind::missing:
      return "missing";
    case Kind::other:
      break;
  }
  return "neither a file nor a folder";
}

Fd open_folder_at(int parent, const std::string& name, const std::string& path) {
  const int fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) throw_errno("open", path, errno);
  return Fd(fd);
}

Fd open_target(const fs::path& target) {
  const int fd = ::open(target.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_errno("open", target.string(), errno);
  return Fd(fd);
}

Place place_of(int root, const std::string& relative, Walk walk,
               const std::set<std::string>* replaceable) {
  std::vector<std::string> parts;
  for (const auto& part : fs::path(relative)) parts.push_back(part.string());
  Fd current(::fcntl(root, F_DUPFD_CLOEXEC, 0));
  if (!current.valid()) throw_errno("open", relative, errno);
  std::string prefix;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    prefix += (i ? "/" : "") + parts[i];
    const Kind kind = kind_at(current.get(), parts[i], prefix);
    if (kind != Kind::folder) {
      const bool replaced = kind != Kind::missing && replaceable && replaceable->count(prefix);
      if (kind != Kind::missing && !replaced) throw UnsafePath{relative, prefix, kind_words(kind)};
      if (walk != Walk::create) return {Fd(), parts.back()};
      if (replaced && ::unlinkat(current.get(), parts[i].c_str(), 0) != 0 && errno != ENOENT)
        throw_errno("remove", prefix, errno);
      if (::mkdirat(current.get(), parts[i].c_str(), 0777) != 0 && errno != EEXIST)
        throw_errno("mkdir", prefix, errno);
    }
    current = open_folder_at(current.get(), parts[i], prefix);  // a link swapped in since: ELOOP
  }
  return {std::move(current), parts.back()};
}

// Removes the entry `name` of `parent` and, when it is a folder, everything in it, never
// following a link (a link is removed, not what it points to).
void remove_tree_at(int parent, const std::string& name, const std::string& path) {
  const Kind kind = kind_at(parent, name, path);
  if (kind == Kind::missing) return;
  if (kind != Kind::folder) {
    if (::unlinkat(parent, name.c_str(), 0) != 0 && errno != ENOENT)
      throw_errno("remove", path, errno);
    return;
  }
  const Fd folder = open_folder_at(parent, name, path);
  std::vector<std::string> names;
  {
    const int copy = ::fcntl(folder.get(), F_DUPFD_CLOEXEC, 0);  // closedir closes it
    DIR* listing = copy < 0 ? nullptr : ::fdopendir(copy);
    if (listing == nullptr) {
      const int error = errno;
      if (copy >= 0) ::close(copy);
      throw_errno("open", path, error);
    }
    while (const dirent* entry = ::readdir(listing)) {
      const std::string child = entry->d_name;
      if (child != "." && child != "..") names.push_back(child);
    }
    ::closedir(listing);
  }
  for (const auto& child : names) remove_tree_at(folder.get(), child, path + "/" + child);
  if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
    throw_errno("remove", path, errno);
}

// A bookkeeping file of the directory (the marker, the commit record): nullopt when there is
// none; refused (UnsafePath) when it is a link or not a plain file, or is larger than any attnres
// writes.
namespace {
constexpr std::uint64_t kBookkeepingLimit = 16u << 20;
}  // namespace

std::optional<std::string> read_bookkeeping(int root, const std::string& name) {
  const int fd = ::openat(root, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    if (errno == ELOOP) throw UnsafePath{name, name, "a symbolic link"};
    throw_errno("open", name, errno);
  }
  const Fd file(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno("stat", name, errno);
  if (!S_ISREG(st.st_mode)) throw UnsafePath{name, name, "not a plain file"};
  if (static_cast<std::uint64_t>(st.st_size) > kBookkeepingLimit)
    throw UnsafePath{name, name, "larger than 16 MiB (attnres writes a few kB)"};
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t got = ::read(fd, text.data() + done, text.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw_errno("read", name, errno);
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  text.resize(done);
  return text;
}

}  // namespace attnres::no_follow

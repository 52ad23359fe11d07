#include "attnres/atomic_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "attnres/error.hpp"
#include "attnres/format.hpp"

namespace attnres {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kTemporaryTag = ".attnres-tmp.";

// Whether process `pid` is running (or exists but is not ours to signal).
bool process_alive(long pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// The PID in a temporary file's name ".NAME.attnres-tmp.PID.N" of `target`, or -1.
long temporary_owner(const std::string& entry, const std::string& prefix) {
  if (entry.size() <= prefix.size() || entry.compare(0, prefix.size(), prefix) != 0) return -1;
  const std::string rest = entry.substr(prefix.size());
  const auto dot = rest.find('.');
  if (dot == 0 || dot == std::string::npos) return -1;
  long pid = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + dot, pid);
  if (ec != std::errc() || end != rest.data() + dot) return -1;
  return pid;
}

// ".NAME.attnres-tmp.", built by appending (GCC 12 -O3 reports a false -Wrestrict for
// "." + name + ...).
std::string temporary_prefix(const fs::path& path) {
  std::string prefix(1, '.');
  prefix.append(path.filename().string());
  prefix.append(kTemporaryTag);
  return prefix;
}

}  // namespace

fs::path temporary_path_for(const fs::path& path) {
  static std::atomic<unsigned long> counter{0};
  std::string name = temporary_prefix(path);
  name.append(std::to_string(::getpid()));
  name.push_back('.');
  name.append(std::to_string(counter++));
  return path.parent_path() / name;
}

bool is_temporary_of(const std::string& entry, const std::string& target_name) {
  if (temporary_owner(entry, temporary_prefix(target_name)) > 0) return true;
  const std::string old = target_name + ".tmp";
  return entry.size() > old.size() && entry.compare(0, old.size(), old) == 0 &&
         std::all_of(entry.begin() + static_cast<std::ptrdiff_t>(old.size()), entry.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

std::size_t remove_stale_temporaries(const fs::path& path) {
  const std::string prefix = temporary_prefix(path);
  std::error_code error;
  const fs::path folder = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  fs::directory_iterator it(folder, error), end;
  std::vector<fs::path> stale;
  for (; !error && it != end; it.increment(error)) {
    const long pid = temporary_owner(it->path().filename().string(), prefix);
    if (pid > 0 && !process_alive(pid)) stale.push_back(it->path());
  }
  std::size_t removed = 0;
  for (const auto& file : stale) {
    std::error_code ignored;
    if (fs::remove(file, ignored)) ++removed;
  }
  return removed;
}

void write_file_atomically(const fs::path& path, std::string_view content) {
  // A temporary of this target left by a process that was killed (SIGKILL, a power cut) goes.
  remove_stale_temporaries(path);
  const fs::path temporary = temporary_path_for(path);
  {
    // A new file, never an existing one or what a link of that name points to.
    const int fd =
        ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) throw Error("cannot write '" + path.string() + "': cannot create a temporary file");
    std::size_t done = 0;
    bool failed = false;
    while (done < content.size()) {
      const ssize_t wrote = ::write(fd, content.data() + done, content.size() - done);
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote <= 0) {
        failed = true;
        break;
      }
      done += static_cast<std::size_t>(wrote);
    }
    if (::close(fd) != 0) failed = true;
    if (failed) {
      std::error_code ignored;
      fs::remove(temporary, ignored);
      throw Error("cannot write '" + path.string() + "': write failed (disk full?)");
    }
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw Error("cannot write '" + path.string() + "': " + error.message());
  }
}

std::string not_a_regular_file(const fs::path& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (fs::is_regular_file(status)) return {};
  if (!fs::exists(status)) return "no such file";
  if (fs::is_directory(status)) return "is a directory";
  if (fs::is_character_file(status) || fs::is_block_file(status)) return "is a device";
  if (fs::is_fifo(status)) return "is a FIFO (named pipe)";
  return "is not a regular file";
}

void check_output_file(const fs::path& path, const std::string& flag) {
  const std::string where = flag + " '" + printable_text(path.string()) + "'";
  std::error_code error;
  if (fs::exists(fs::status(path, error))) {
    if (const std::string what = not_a_regular_file(path); !what.empty())
      throw Error(where + ": " + what + ", expected a file (or a new file name)");
  }
  const fs::path parent = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  if (!fs::is_directory(parent, error)) {
    throw Error(where + ": '" + printable_text(parent.string()) + "' is " +
                (fs::exists(parent, error) ? "not a directory" : "missing"));
  }
  // Permission bits do not tell (root ignores them; /proc and read-only mounts refuse anyway):
  // make the temporary write_file_atomically would make, and remove it.
  const fs::path temporary = temporary_path_for(path);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw Error(where + ": cannot write in '" + printable_text(parent.string()) +
                "': " + std::strerror(errno));
  }
  ::close(fd);
  fs::remove(temporary, error);
}

std::string read_file(const fs::path& path, std::string_view expected) {
  if (const std::string what = not_a_regular_file(path); !what.empty()) {
    throw Error("cannot read '" + path.string() + "': " + what +
                (expected.empty() || what == "no such file"
                     ? std::string()
                     : ", expected " + std::string(expected)));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path.string() + "': cannot open it");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error("cannot read '" + path.string() + "': read failed");
  return buffer.str();
}

}  // namespace attnres

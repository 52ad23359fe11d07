#include "attnres/output_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/version.hpp"

namespace attnres {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStagingPrefix = ".attnres-staging.";

std::string quoted(const fs::path& path) {
  return "'" + printable_text(path.string()) + "'";
}

// The marker: for each set, the relative paths (generic form) attnres wrote.
using Sets = std::map<std::string, std::set<std::string>>;

struct Marker {
  bool present = false;
  bool readable = true;
  Sets sets;
};

Marker read_marker(const fs::path& directory) {
  Marker marker;
  const fs::path path = directory / kOutputMarkerName;
  std::error_code error;
  if (!fs::exists(path, error)) return marker;
  marker.present = true;
  try {
    const nlohmann::json json = nlohmann::json::parse(read_file(path));
    for (const auto& [name, files] : json.at("sets").items()) {
      for (const auto& file : files) marker.sets[name].insert(file.get<std::string>());
    }
  } catch (const std::exception&) {
    marker.readable = false;
    marker.sets.clear();
  }
  return marker;
}

void write_marker(const fs::path& directory, const Sets& sets) {
  nlohmann::json json = {{"tool", "attnres"},
                         {"version", kVersion},
                         {"about",
                          "files attnres wrote in this directory, by command; attnres "
                          "replaces only these (see docs/output-safety.md)"}};
  nlohmann::json by_set = nlohmann::json::object();
  for (const auto& [name, files] : sets)
    by_set[name] = std::vector<std::string>(files.begin(), files.end());
  json["sets"] = by_set;
  write_file_atomically(directory / kOutputMarkerName, json.dump(2) + "\n");
}

bool is_staging_name(const std::string& name) {
  return name.rfind(kStagingPrefix, 0) == 0;
}

// pid of a staging folder's owner, or 0 when the name is not ours.
long staging_pid(const std::string& name) {
  if (!is_staging_name(name)) return 0;
  const std::string rest = name.substr(std::char_traits<char>::length(kStagingPrefix));
  const std::size_t dot = rest.find('.');
  try {
    return std::stol(rest.substr(0, dot));
  } catch (const std::exception&) {
    return 0;
  }
}

bool process_alive(long pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

struct Listing {
  std::vector<std::string> files;  // non-directories, relative generic paths
  std::vector<std::string> directories;
};

Listing list_directory(const fs::path& directory) {
  Listing listing;
  std::error_code error;
  fs::recursive_directory_iterator it(directory, fs::directory_options::none, error), end;
  if (error) throw Error("cannot read directory " + quoted(directory) + ": " + error.message());
  for (; it != end; it.increment(error)) {
    if (error) throw Error("cannot read directory " + quoted(directory) + ": " + error.message());
    const fs::path relative = it->path().lexically_relative(directory);
    const std::string name = relative.generic_string();
    if (it.depth() == 0 && (name == kOutputMarkerName || is_staging_name(name))) {
      if (it->is_directory(error)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_directory(error) && !it->is_symlink(error)) {
      listing.directories.push_back(name);
    } else {
      listing.files.push_back(name);
    }
  }
  std::sort(listing.files.begin(), listing.files.end());
  std::sort(listing.directories.begin(), listing.directories.end());
  return listing;
}

bool has_prefix_dir(const std::string& file, const std::string& directory) {
  return file.size() > directory.size() && file.compare(0, directory.size(), directory) == 0 &&
         file[directory.size()] == '/';
}

// Canonical paths of the inputs relative to `directory` ("" entries dropped): the inputs that
// lie inside it.
std::vector<std::string> inputs_inside(const fs::path& directory,
                                       const std::vector<fs::path>& inputs) {
  std::vector<std::string> inside;
  std::error_code error;
  const fs::path root = fs::weakly_canonical(directory, error);
  if (error) return inside;
  for (const auto& input : inputs) {
    const fs::path canonical = fs::weakly_canonical(input, error);
    if (error) continue;
    const fs::path relative = canonical.lexically_relative(root);
    if (relative.empty() || *relative.begin() == "..") continue;
    inside.push_back(relative.generic_string());
  }
  return inside;
}

bool protects(const std::vector<std::string>& inputs, const std::string& entry) {
  return std::any_of(inputs.begin(), inputs.end(), [&](const std::string& input) {
    return input == entry || has_prefix_dir(input, entry);
  });
}

struct Ownership {
  Marker marker;
  Listing listing;
  std::vector<std::string> foreign_files, foreign_directories;
};

Ownership inspect(const fs::path& directory) {
  Ownership o;
  o.marker = read_marker(directory);
  o.listing = list_directory(directory);
  std::set<std::string> owned;
  for (const auto& [name, files] : o.marker.sets) owned.insert(files.begin(), files.end());
  for (const auto& file : o.listing.files) {
    if (!owned.count(file)) o.foreign_files.push_back(file);
  }
  for (const auto& dir : o.listing.directories) {
    const bool holds_owned = std::any_of(owned.begin(), owned.end(), [&](const std::string& file) {
      return has_prefix_dir(file, dir);
    });
    if (!holds_owned) o.foreign_directories.push_back(dir);
  }
  return o;
}

// "notes.txt, data/, s.toml" (top-level names, at most 5, then "and N more").
std::string describe_entries(const std::vector<std::string>& files,
                             const std::vector<std::string>& directories) {
  std::vector<std::string> names;
  auto add = [&](const std::string& entry, bool is_directory) {
    const std::size_t slash = entry.find('/');
    const std::string top =
        slash == std::string::npos ? entry + (is_directory ? "/" : "") : entry.substr(0, slash + 1);
    if (std::find(names.begin(), names.end(), top) == names.end()) names.push_back(top);
  };
  for (const auto& f : files) add(f, false);
  for (const auto& d : directories) add(d, true);
  std::string text;
  for (std::size_t i = 0; i < names.size() && i < 5; ++i)
    text += (i ? ", " : "") + printable_text(names[i]);
  if (names.size() > 5) text += " and " + std::to_string(names.size() - 5) + " more";
  return text;
}

void check_ownership(const fs::path& target, const OutputDirectoryOptions& options,
                     const Ownership& o, const std::vector<std::string>& inputs) {
  if (options.force) return;
  if (!o.foreign_files.empty() || !o.foreign_directories.empty()) {
    std::string inputs_note;
    for (const auto& input : inputs) {
      if (std::find(o.foreign_files.begin(), o.foreign_files.end(), input) !=
          o.foreign_files.end()) {
        inputs_note = " (it holds this command's input " + printable_text(input) +
                      ", which is never removed)";
        break;
      }
    }
    throw Error(options.flag + " " + quoted(target) +
                ": the directory holds files attnres did not write (" +
                describe_entries(o.foreign_files, o.foreign_directories) + ")" + inputs_note +
                (o.marker.present && !o.marker.readable
                     ? "; its " + std::string(kOutputMarkerName) + " is unreadable"
                     : "") +
                "; choose a new or empty directory, or pass --force to replace its contents");
  }
}

std::atomic<unsigned> staging_counter{0};

void remove_quietly(const fs::path& path) {
  std::error_code ignored;
  fs::remove_all(path, ignored);
}

// An exclusive lock on the directory for the commit (several commands may share a directory).
class DirectoryLock {
 public:
  explicit DirectoryLock(const fs::path& directory)
      : fd_(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~DirectoryLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_;
};

}  // namespace

std::vector<std::string> output_directory_notes(const OutputDirectoryResult& result) {
  std::vector<std::string> notes;
  for (const auto& name : result.stale_staging) {
    notes.push_back("removed " + printable_text((result.directory / name).string()) +
                    ", a staging folder left by an interrupted run");
  }
  for (const auto& path : result.legacy_staging) {
    notes.push_back(printable_text(path.string()) +
                    " looks like a staging folder left by an older attnres "
                    "run; remove it if no attnres command is running");
  }
  return notes;
}

fs::path clean_output_path(const std::string& text, const std::string& flag) {
  if (text.empty()) throw Error(flag + ": an empty path was given (expected a directory)");
  fs::path path = fs::path(text).lexically_normal();
  while (path.has_parent_path() && path.filename().empty()) path = path.parent_path();
  if (path.empty()) path = ".";
  return path;
}

void validate_output_name(const std::string& name, const std::string& flag) {
  auto fail = [&](const std::string& why) {
    throw Error(flag + " '" + printable_text(name) + "': " + why +
                " (expected a plain file-name stem such as 'io' or 'blocks-sweep')");
  };
  if (name.empty()) fail("is empty");
  if (name == "." || name == "..") fail("is not a file name");
  if (name.find('/') != std::string::npos || name.find('\\') != std::string::npos)
    fail("contains a path separator");
  if (name.front() == '.') fail("starts with '.' (hidden files are attnres's own)");
  for (const unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) fail("contains a control character");
  }
  if (name.size() > 200) fail("is longer than 200 characters");
}

void refuse_overwriting_inputs(const fs::path& output, const std::vector<fs::path>& inputs,
                               const std::string& flag) {
  std::error_code error;
  const fs::path out = fs::weakly_canonical(output, error);
  if (error) return;
  for (const auto& input : inputs) {
    const fs::path in = fs::weakly_canonical(input, error);
    if (error) continue;
    if (in == out ||
        (!out.lexically_relative(in).empty() && *out.lexically_relative(in).begin() != "..")) {
      throw Error(flag + " " + quoted(output) + " would overwrite " + quoted(input) +
                  ", an input of this command; choose another path");
    }
  }
}

void check_output_directory(const fs::path& target, const OutputDirectoryOptions& options) {
  std::error_code error;
  const auto status = fs::status(target, error);
  if (!fs::exists(status)) return;
  if (!fs::is_directory(status)) {
    throw Error(options.flag + " " + quoted(target) + ": exists and is not a directory");
  }
  check_ownership(target, options, inspect(target), inputs_inside(target, options.inputs));
}

OutputDirectoryResult write_output_directory(const fs::path& target,
                                             const OutputDirectoryOptions& options,
                                             const std::function<void(const fs::path&)>& build) {
  check_output_directory(target, options);
  OutputDirectoryResult result;
  result.directory = target;
  std::error_code error;
  bool created = false;
  if (!fs::exists(target, error)) {
    created = fs::create_directories(target, error);
    if (error || !fs::is_directory(target)) {
      throw Error("cannot create " + options.flag + " directory " + quoted(target) +
                  (error ? ": " + error.message() : ""));
    }
  }
  auto undo_creation = [&] {
    if (created) {
      std::error_code ignored;
      fs::remove(target, ignored);  // only when still empty
    }
  };

  // Staging folders of killed runs.
  for (const auto& entry : fs::directory_iterator(target, error)) {
    const std::string name = entry.path().filename().string();
    const long pid = staging_pid(name);
    if (pid != 0 && pid != static_cast<long>(::getpid()) && !process_alive(pid)) {
      remove_quietly(entry.path());
      result.stale_staging.push_back(name);
    }
  }

  // Staging folders of attnres 0.1, which staged beside the target (".NAME.partialN"): reported,
  // not removed (their owner cannot be told).
  const std::string legacy =
      "." + fs::absolute(target).lexically_normal().filename().string() + ".partial";
  for (const auto& entry : fs::directory_iterator(fs::absolute(target).parent_path(), error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(legacy, 0) == 0) result.legacy_staging.push_back(entry.path());
  }

  const fs::path staging = target / (kStagingPrefix + std::to_string(::getpid()) + "." +
                                     std::to_string(staging_counter.fetch_add(1)));
  try {
    fs::create_directory(staging, error);
    if (error) {
      throw Error("cannot write into " + options.flag + " directory " + quoted(target) + ": " +
                  error.message());
    }
    build(staging);
    report_progress(options.progress, 1, 1, "writing " + target.string());

    const DirectoryLock lock(target);
    const Ownership o = inspect(target);
    const std::vector<std::string> inputs = inputs_inside(target, options.inputs);
    check_ownership(target, options, o, inputs);
    const Listing staged = list_directory(staging);
    result.written = staged.files;

    Sets sets = o.marker.sets;
    const std::set<std::string> previous =
        sets.count(options.owner) ? sets[options.owner] : std::set<std::string>{};
    for (const auto& file : staged.files) {
      if (protects(inputs, file)) {
        throw Error(options.flag + " " + quoted(target) + ": writing " + printable_text(file) +
                    " would overwrite an input of this command; choose another directory");
      }
      for (const auto& [name, files] : sets) {
        if (name != options.owner && files.count(file) && !options.force) {
          throw Error(options.flag + " " + quoted(target) + ": " + printable_text(file) +
                      " belongs to the output '" + name +
                      "' in that directory; choose another name or directory "
                      "(or pass --force)");
        }
      }
    }
    const std::set<std::string> written(staged.files.begin(), staged.files.end());
    std::vector<std::string> to_remove;
    for (const auto& file : previous) {
      if (!written.count(file) && !protects(inputs, file)) to_remove.push_back(file);
    }
    if (options.force) {
      for (const auto& file : o.foreign_files) {
        if (!protects(inputs, file) && !written.count(file)) to_remove.push_back(file);
      }
    }
    // Move the new files into place; each rename replaces one file atomically.
    for (const auto& file : staged.files) {
      const fs::path destination = target / file;
      fs::create_directories(destination.parent_path());
      if (fs::is_directory(fs::symlink_status(destination)))
        fs::remove_all(destination);  // --force only
      fs::rename(staging / file, destination);
    }
    for (const auto& file : to_remove) {
      fs::remove(target / file, error);
      if (!error) result.removed.push_back(file);
    }
    // Directories left empty (of removed files, or foreign ones under --force), deepest first.
    std::vector<std::string> directories = o.listing.directories;
    std::sort(directories.rbegin(), directories.rend());
    for (const auto& dir : directories) {
      const bool foreign = std::find(o.foreign_directories.begin(), o.foreign_directories.end(),
                                     dir) != o.foreign_directories.end();
      if (foreign && !options.force) continue;
      if (protects(inputs, dir)) continue;
      if (fs::is_empty(target / dir, error) && !error && fs::remove(target / dir, error)) {
        if (foreign) result.removed.push_back(dir + "/");
      }
    }
    for (auto& [name, files] : sets) {
      for (const auto& file : written) files.erase(file);
      for (const auto& file : to_remove) files.erase(file);
    }
    sets[options.owner] = written;
    for (auto it = sets.begin(); it != sets.end();)
      it = it->second.empty() ? sets.erase(it) : std::next(it);
    write_marker(target, sets);
  } catch (const fs::filesystem_error& failure) {
    remove_quietly(staging);
    undo_creation();
    throw Error("cannot write " + options.flag + " directory " + quoted(target) + ": " +
                failure.code().message());
  } catch (const Cancelled&) {
    remove_quietly(staging);
    undo_creation();
    throw;
  } catch (const Error& failure) {
    // Messages name the file as the user will see it, never the staging folder.
    remove_quietly(staging);
    undo_creation();
    std::string message = failure.what();
    const std::string hidden = staging.string();
    for (std::size_t at = message.find(hidden); at != std::string::npos;
         at = message.find(hidden, at)) {
      message.replace(at, hidden.size(), target.string());
    }
    throw Error(message);
  } catch (...) {
    remove_quietly(staging);
    undo_creation();
    throw;
  }
  remove_quietly(staging);
  return result;
}

}  // namespace attnres

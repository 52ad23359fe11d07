// What an output directory holds and whose it is (output_ownership.hpp).
#include "output_ownership.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/json_reading.hpp"
#include "attnres/version.hpp"
#include "no_follow.hpp"

namespace attnres::output_ownership {

using namespace no_follow;  // NOLINT: the walk below the directory (no_follow.hpp)

// ---- Durability: what a commit switches to is on disk before the switch.

void sync_path(const fs::path& path, bool directory) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0)
    throw fs::filesystem_error("open", path, std::error_code(errno, std::generic_category()));
  const int status = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (status != 0 && error != EINVAL && error != EROFS)  // EINVAL: a file system without fsync
    throw fs::filesystem_error("fsync", path, std::error_code(error, std::generic_category()));
}

// Every file and folder below `root`, then `root`.
void sync_tree(const fs::path& root) {
  std::vector<fs::path> directories{root};
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_symlink()) continue;
    if (entry.is_directory()) {
      directories.push_back(entry.path());
    } else if (entry.is_regular_file()) {
      sync_path(entry.path(), false);
    }
  }
  for (auto it = directories.rbegin(); it != directories.rend(); ++it) sync_path(*it, true);
}

// `content` to `path` so that after a crash either the old file or all of the new one is there.
void write_durably(const fs::path& path, const std::string& content) {
  write_file_atomically(path, content);
  sync_path(path, false);
  sync_path(path.parent_path(), true);
}

std::string quoted(const fs::path& path) {
  // Appended, not "'" + text + "'": GCC 12 at -O3 warns a false -Wrestrict on that form here.
  std::string text = "'";
  text += printable_text(path.string());
  text += '\'';
  return text;
}

Sets sets_from_json(const nlohmann::json& json) {
  Sets sets;
  for (const auto& [name, files] : json.items()) {
    for (const auto& file : files) sets[name].insert(file.get<std::string>());
  }
  return sets;
}

// Whether every path of the sets is a plain relative path inside the directory that leads through
// folders only (so a marker naming "../x", "/etc/x", lnk/x or attnres's own bookkeeping is not
// used).
bool sets_inside(int root, const Sets& sets, const std::set<std::string>* replaceable) {
  for (const auto& [name, files] : sets) {
    for (const auto& file : files) {
      if (!inside(file)) return false;
      try {
        place_of(root, file, Walk::check, replaceable);
      } catch (const UnsafePath&) {
        return false;
      }
    }
  }
  return true;
}

nlohmann::json sets_json(const Sets& sets) {
  nlohmann::json by_set = nlohmann::json::object();
  for (const auto& [name, files] : sets)
    by_set[name] = std::vector<std::string>(files.begin(), files.end());
  return by_set;
}

// An unreadable marker (torn, hand-edited, a link, naming paths outside the directory) makes
// every file foreign: nothing is replaced without --force.
Marker read_marker(const fs::path& directory) {
  Marker marker;
  try {
    const Fd root = open_target(directory);
    const std::optional<std::string> text = read_bookkeeping(root.get(), kOutputMarkerName);
    if (!text) return marker;
    marker.present = true;
    marker.sets = sets_from_json(
        parse_json_document(*text, (directory / kOutputMarkerName).string()).at("sets"));
    if (!sets_inside(root.get(), marker.sets)) throw std::runtime_error("outside");
  } catch (const std::exception&) {
    marker.present = true;
    marker.readable = false;
    marker.sets.clear();
  } catch (const UnsafePath&) {
    marker.present = true;
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
  json["sets"] = sets_json(sets);
  write_durably(directory / kOutputMarkerName, json.dump(2) + "\n");
}

bool is_staging_name(const std::string& name) {
  return name.rfind(kStagingPrefix, 0) == 0;
}

bool is_bookkeeping_name(const std::string& name) {
  if (name == kOutputMarkerName || name == kCommitName || is_staging_name(name)) return true;
  // Temporary files of the marker and the commit record (a kill while either was written); a
  // user's file that merely contains those names is not ours.
  return is_temporary_of(name, kOutputMarkerName) || is_temporary_of(name, kCommitName);
}

Listing list_directory(const fs::path& directory) {
  Listing listing;
  std::error_code error;
  fs::recursive_directory_iterator it(directory, fs::directory_options::none, error), end;
  if (error) throw Error("cannot read directory " + quoted(directory) + ": " + error.message());
  for (; it != end; it.increment(error)) {
    if (error) throw Error("cannot read directory " + quoted(directory) + ": " + error.message());
    const fs::path relative = it->path().lexically_relative(directory);
    const std::string name = relative.generic_string();
    if (it.depth() == 0 && is_bookkeeping_name(name)) {
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

// Whether removing or replacing `entry` would touch an input: the input itself, a folder that
// holds one, or a file inside an input folder (a model directory's config.json).
bool protects(const std::vector<std::string>& inputs, const std::string& entry) {
  return std::any_of(inputs.begin(), inputs.end(), [&](const std::string& input) {
    return input == entry || has_prefix_dir(input, entry) || has_prefix_dir(entry, input);
  });
}

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

// A path from a record or the marker: relative, no "..", no "." or empty part, and not attnres's
// own bookkeeping (the marker, the record, a staging folder) at the top.
bool inside(const std::string& relative) {
  const fs::path path(relative);
  if (relative.empty() || path.is_absolute() || relative.find('\0') != std::string::npos)
    return false;
  if (relative.front() == '/' || relative.back() == '/' || relative.find("//") != std::string::npos)
    return false;
  if (is_bookkeeping_name(path.begin()->string())) return false;
  return std::none_of(path.begin(), path.end(), [](const fs::path& part) {
    return part == ".." || part == "." || part.empty();
  });
}

}  // namespace attnres::output_ownership

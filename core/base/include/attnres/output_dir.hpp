// Output directories that never lose a user's files (docs/output-safety.md).
//
// A command that writes a directory (`report --out`, `sweep --out`, `init-model --out`) owns a
// named *set* of files in it ("report", "sweep:io", "model"). attnres records every set it wrote
// in a marker file, `.attnres-output.json`, inside the directory. A command may write into a
// directory only when
//   - the directory is new or empty, or
//   - every entry in it was written by attnres (listed in the marker),
// and otherwise refuses, naming the foreign entries; `force` is the explicit way to replace a
// directory that holds other files (they are removed, except the command's own inputs).
// Files of other sets are left alone, so several sweeps can share one directory; a set is
// replaced as a whole (files of its previous run that the new run does not write are removed).
//
// The new files are built in a staging folder inside the target (`.attnres-staging.PID.N`), then
// moved into place one by one; each file appears complete. The staging folder is removed on every
// exit we control (errors, cancellation); a staging folder left by a killed process is removed by
// the next command that writes the directory (and reported).
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"

namespace attnres {

inline constexpr const char* kOutputMarkerName = ".attnres-output.json";

struct OutputDirectoryOptions {
  std::string owner;                          // the set of files this command writes
  std::string flag = "--out";                 // named in messages
  bool force = false;                         // replace a directory holding foreign files
  std::vector<std::filesystem::path> inputs;  // never deleted or overwritten
  Progress progress;                          // checked before the files are moved into place
};

struct OutputDirectoryResult {
  std::filesystem::path directory;         // where the files are (as the user wrote it, cleaned)
  std::vector<std::string> written;        // relative paths of the set's files
  std::vector<std::string> removed;        // relative paths removed (previous run or --force)
  std::vector<std::string> stale_staging;  // staging folders of killed runs that were removed
  std::vector<std::filesystem::path> legacy_staging;  // older attnres's ".NAME.partialN" beside it
};

// Lines that tell the user about stale staging folders ("note: ..."), empty when there were none.
std::vector<std::string> output_directory_notes(const OutputDirectoryResult& result);

// "out/r/" -> "out/r", "./x//" -> "x", "." stays ".". Throws attnres::Error on an empty path.
std::filesystem::path clean_output_path(const std::string& text, const std::string& flag);

// Checks, before any work, that `target` may be written with `options` (throws attnres::Error
// with the reason otherwise). write_output_directory checks again when it commits.
void check_output_directory(const std::filesystem::path& target,
                            const OutputDirectoryOptions& options);

// Runs `build` on an empty staging folder and moves what it wrote into `target` under the rules
// above. Throws attnres::Error (or Cancelled) and leaves `target` as it was on failure.
OutputDirectoryResult write_output_directory(
    const std::filesystem::path& target, const OutputDirectoryOptions& options,
    const std::function<void(const std::filesystem::path& staging)>& build);

// Throws attnres::Error when `name` cannot be a file-name stem of an output (empty, a path
// separator, "." or "..", a leading '.', control characters). `flag` is named in the message.
void validate_output_name(const std::string& name, const std::string& flag);

// Throws attnres::Error when writing the file `output` would overwrite one of `inputs`.
void refuse_overwriting_inputs(const std::filesystem::path& output,
                               const std::vector<std::filesystem::path>& inputs,
                               const std::string& flag);

}  // namespace attnres

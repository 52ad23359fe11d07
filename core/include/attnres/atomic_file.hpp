// Writing output files so that a reader never sees half of one.
//
// Content goes to a temporary file in the same directory, is flushed, and is renamed over the
// target: either the old file or the complete new one is there, never a partial write.
#pragma once

#include <filesystem>
#include <functional>
#include <string_view>

namespace attnres {

// Writes `content` to `path` atomically (temporary file + rename). Throws attnres::Error naming
// the path on failure, and leaves no temporary file behind.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

// Builds a directory as a whole: `build` fills a staging directory beside `target`, which is then
// renamed into place (missing parent directories are created). On any failure the staging directory is removed and an existing `target`
// is left as it was; on success an existing `target` is replaced.
void write_directory_atomically(const std::filesystem::path& target,
                                const std::function<void(const std::filesystem::path&)>& build);

// Reads a whole file; throws attnres::Error naming the path when it cannot be read.
std::string read_file(const std::filesystem::path& path);

}  // namespace attnres

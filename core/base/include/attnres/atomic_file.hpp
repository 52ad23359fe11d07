// Writing output files so that a reader never sees half of one.
//
// Content goes to a temporary file in the same directory, is flushed, and is renamed over the
// target: either the old file or the complete new one is there, never a partial write.
#pragma once

#include <filesystem>
#include <string_view>

namespace attnres {

// Writes `content` to `path` atomically (temporary file + rename). Throws attnres::Error naming
// the path on failure, and leaves no temporary file behind.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

// Directories of outputs are written by write_output_directory (output_dir.hpp).

// Reads a whole file; throws attnres::Error naming the path when it cannot be read.
std::string read_file(const std::filesystem::path& path);

}  // namespace attnres

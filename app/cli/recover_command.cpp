// attnres recover: completes a write of an output directory that was interrupted after its
// commit record (docs/output-safety.md, "How a write happens"), which readers refuse rather than
// change; drops a record torn by a power cut; removes staging folders of killed runs. A record
// that names anything outside the directory is refused and nothing changes.
#include <ostream>

#include "attnres/format.hpp"
#include "attnres/output_dir.hpp"
#include "cli.hpp"
#include "options.hpp"

namespace attnres::cli {

int recover_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string directory;
  po::options_description options = command_options("recover");
  options.add_options()("directory", po::value(&directory)->required(),
                        "the directory (a model, a checkpoint, a report, a sweep's --out)");
  po::positional_options_description positional;
  positional.add("directory", 1);
  po::variables_map values;
  if (parse_or_help(args, options, values, out,
                    "usage: attnres recover (DIR | --directory DIR)\n"
                    "Completes an attnres write of DIR that was interrupted after its commit "
                    "record (.attnres-commit.json), which commands that only read DIR refuse "
                    "rather than change; removes staging folders of killed runs "
                    "(docs/output-safety.md).",
                    &positional)) {
    return kExitOk;
  }
  const std::vector<std::string> notes =
      recover_output_directory(clean_output_path(directory, "DIR"));
  for (const auto& note : notes) err << "note: " << note << "\n";
  out << (notes.empty() ? "nothing to recover in " : "recovered ") << printable_text(directory)
      << "\n";
  return kExitOk;
}

}  // namespace attnres::cli

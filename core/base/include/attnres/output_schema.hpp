// The names and versions of attnres's machine-readable outputs (docs/json.md): every JSON object
// a command prints or writes carries "schema": {"name": "attnres.NAME", "version": N}, and
// docs/schema/NAME.schema.json describes it. One table, so that a schema's version is raised in
// one place (and in docs/json.md's changelog).
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace attnres {

struct OutputSchema {
  std::string_view name;  // without the "attnres." prefix; also the schema file's name
  int version;
  std::string_view produced_by;  // the command (and flags) that prints it
};

inline constexpr OutputSchema kOutputSchemas[] = {
    {"cost", 1, "cost --format json"},
    {"cost_schemes", 1, "cost --scheme ... --format json"},
    {"strategies", 1, "strategies --format json"},
    {"layout", 1, "layout --format json"},
    {"recompute", 1, "recompute --format json"},
    {"calibrate", 1, "calibrate --format json"},
    {"calibrate_measure", 1, "calibrate --measure --format json"},
    {"scaling", 1, "scaling --format json"},
    {"evidence", 1, "evidence --format json"},
    {"validate", 1, "validate --format json"},
    {"sweep", 1, "sweep --format json, and NAME.json of sweep --out"},
    {"pipeline", 1, "pipeline --format json"},
    {"memory", 1, "memory --format json"},
    {"plan", 1, "plan --format json"},
    {"metrics", 1, "metrics --format json"},
    {"train", 1, "train --format json"},
    {"bench", 1, "bench --format json"},
    {"forward_trace", 1, "forward --trace FILE"},
    {"mask", 1, "mask --format json"},
    {"read", 1, "read --format json"},
    {"inspect", 1, "inspect --format json, and inspect.json of inspect --out"},
    {"animate", 1, "frames.json of animate --out"},
    {"report", 1, "report.json of report --out"},
    {"error", 1, "any command with --format json that fails or is interrupted"},
    {"lab_state", 1, "attnres-lab --scenario FILE --dump-state OUT.json"},
};

// {"name": "attnres.NAME", "version": N} of the schema `name` (one of kOutputSchemas; a name
// that is not there is a programming error and throws std::logic_error).
nlohmann::json schema_tag(std::string_view name);

}  // namespace attnres

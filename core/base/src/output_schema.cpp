// The schema tags of attnres's JSON outputs (output_schema.hpp).
#include "attnres/output_schema.hpp"

#include <stdexcept>
#include <string>

namespace attnres {

nlohmann::json schema_tag(std::string_view name) {
  for (const auto& schema : kOutputSchemas) {
    if (schema.name == name)
      return {{"name", "attnres." + std::string(name)}, {"version", schema.version}};
  }
  throw std::logic_error("no output schema named " + std::string(name));
}

}  // namespace attnres

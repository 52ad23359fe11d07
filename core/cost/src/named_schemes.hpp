// Internal to the cost library: what evaluate_costs needs of the named-scheme table in
// named_schemes.cpp (docs/scheme-costs.md "Named schemes") without looking names up per call.
#pragma once

#include <cstddef>

#include "attnres/cost.hpp"

namespace attnres::detail {

// The named scheme of row `index` of kSchemeIoKeys at these sizes, as named_scheme gives it (the
// name is looked up once for all calls: sweeps evaluate millions of settings).
AttnResConfig scheme_of_io_key(std::size_t index, const CostInputs& resolved);

}  // namespace attnres::detail

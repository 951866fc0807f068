#pragma once
// The counts of a speculative run as JSON: `strata bench`'s record and `strata run --ids-out`
// write the same fields (docs/BENCH.md), from one function.
#include <nlohmann/json.hpp>

#include "strata/engine/generate.h"

namespace strata::bench {

// windows, drafted, accepted, their ratios, and the MTP / lookup split of each count.
nlohmann::json spec_counts_json(const engine::SpecStats& s);

}  // namespace strata::bench

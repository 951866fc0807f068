// Integer switches read from the environment (the STRATA_* variables that select the other arm of
// a measurement). Unset is "no value"; a set variable must hold a whole decimal integer in
// [lo, hi], else the result is an error naming the variable, the range and the text, so a typo
// never silently runs the default.
#pragma once

#include <optional>

#include "strata/common/status.h"

namespace strata {

// The value `text` of the variable `name` (nullptr: unset).
Result<std::optional<int>> parse_env_int(const char* name, const char* text, int lo, int hi);

}  // namespace strata

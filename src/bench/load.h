// Internal to the bench library: the model a bench runs, opened and paged in (load.cpp).
#pragma once

#include <memory>

#include "strata/bench/options.h"
#include "strata/bench/progress.h"
#include "strata/bench/report.h"
#include "strata/reference/model.h"
#include "strata/synth/synth.h"

namespace strata::bench {

// The synthetic pack --synth asks for: its recipe (known: validate() checked it), --layers,
// --experts and --synth-seed.
synth::Options synth_options(const Options& options);

// Fills rep.model, rep.load_s and rep.prefault_s (and a note for in-memory packs).
Result<std::unique_ptr<reference::Model>> load_model(const Options& options, int threads, Progress& progress,
                                                     Report& rep);

}  // namespace strata::bench

// The whole bench: check the options, describe the machine, measure the memory roof, load
// the model (a file, or a synthetic pack written to RAM-backed storage), page its weights in,
// run every context and return the Report. The CLI prints and writes it.
#pragma once

#include "strata/bench/options.h"
#include "strata/bench/progress.h"
#include "strata/bench/report.h"
#include "strata/common/status.h"

namespace strata::bench {

Result<Report> run_bench(const Options& options, Progress& progress);

}  // namespace strata::bench

// The whole bench: check the options, describe the machine, measure the memory roof, load
// the model (a file, or a synthetic pack written to RAM-backed storage), page its weights in,
// run every context and return the Report. The CLI prints and writes it. --device cuda goes
// to run_cuda_bench.
#pragma once

#include "strata/bench/options.h"
#include "strata/bench/progress.h"
#include "strata/bench/report.h"
#include "strata/common/status.h"

namespace strata::bench {

Result<Report> run_bench(const Options& options, Progress& progress);

// The same for --device cuda (cuda_runner.cpp, built only when cuda_built()): the GPU's roof,
// the CUDA decoder, the window sweep and the profile (include/strata/bench/cuda_bench.h).
Result<Report> run_cuda_bench(const Options& options, Progress& progress);

// A Report with the run's identity filled: time, command, version, machine, options, load.
Report new_report(const Options& options);

}  // namespace strata::bench

// The strata binary's subcommands. Each command file defines one add_<name>_command that
// declares its options on a CLI11 subcommand and returns the function that runs it.
// main.cpp lists them in one table; a command returns the process exit code.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace strata::cli {

using CommandMain = std::function<int()>;

CommandMain add_inspect_command(CLI::App& app);
CommandMain add_devices_command(CLI::App& app);
CommandMain add_parity_command(CLI::App& app);
CommandMain add_tokenize_command(CLI::App& app);
CommandMain add_synth_command(CLI::App& app);
CommandMain add_run_command(CLI::App& app);
CommandMain add_bench_command(CLI::App& app);

}  // namespace strata::cli

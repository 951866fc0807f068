// strata: the command-line entry. Only this file decides the exit code.
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"

namespace {

struct CommandEntry {
  const char* name;
  strata::cli::CommandMain (*add)(CLI::App&);
};

constexpr CommandEntry kCommands[] = {
    {"inspect", strata::cli::add_inspect_command},
    {"devices", strata::cli::add_devices_command},
    {"parity", strata::cli::add_parity_command},
    {"tokenize", strata::cli::add_tokenize_command},
    {"synth", strata::cli::add_synth_command},
    {"run", strata::cli::add_run_command},
    {"bench", strata::cli::add_bench_command},
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata: a native engine for Qwen3.8-Flash-Next (GGUF qwen4exp)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "strata 0.1.0");

  std::vector<std::pair<CLI::App*, strata::cli::CommandMain>> commands;
  for (const CommandEntry& entry : kCommands) {
    CLI::App* sub = app.add_subcommand(entry.name);
    commands.emplace_back(sub, entry.add(*sub));
  }
  CLI11_PARSE(app, argc, argv);
  for (auto& [sub, run] : commands) {
    if (sub->parsed()) return run();
  }
  return 2;
}

// `strata devices [--measure] [--json]`: the GPUs this build sees and, with --measure, each
// one's memory-read roof (the number `strata bench` divides by for roof_fraction).
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"

#ifdef STRATA_HAVE_CUDA
#include "strata/cuda/device.h"
#endif

namespace strata::cli {
namespace {

struct DevicesOptions {
  bool measure = false;
  bool json = false;
  double probe_gib = 4.0;
};

#ifdef STRATA_HAVE_CUDA
int run_devices(const DevicesOptions& opt) {
  auto devices = cuda::list_devices();
  if (!devices) {
    fmt::print(stderr, "strata devices: {}\n", devices.error());
    return 1;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const cuda::DeviceInfo& d : *devices) {
    nlohmann::json j = {{"index", d.index}, {"name", d.name}, {"compute_capability", fmt::format("{}.{}", d.cc_major, d.cc_minor)},
                        {"sm_count", d.sm_count}, {"total_bytes", d.total_bytes}, {"free_bytes", d.free_bytes},
                        {"l2_bytes", d.l2_bytes}};
    if (opt.measure) {
      auto bw = cuda::measure_read_bandwidth(d.index, static_cast<size_t>(opt.probe_gib * (1ull << 30)), 20);
      if (!bw) {
        fmt::print(stderr, "strata devices: device {}: {}\n", d.index, bw.error());
        return 1;
      }
      j["read_gb_s"] = bw->read_gb_s;
      j["probe_bytes"] = bw->bytes_per_pass;
      j["probe_median_ms"] = bw->median_ms;
    }
    out.push_back(j);
  }
  if (opt.json) {
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  for (const auto& j : out) {
    fmt::print("cuda:{}  {}  sm_{}  {} SMs  {:.1f} GiB ({:.1f} GiB free)", j["index"].get<int>(), j["name"].get<std::string>(),
               j["compute_capability"].get<std::string>(), j["sm_count"].get<int>(),
               j["total_bytes"].get<double>() / (1ull << 30), j["free_bytes"].get<double>() / (1ull << 30));
    if (opt.measure) fmt::print("  read {:.0f} GB/s", j["read_gb_s"].get<double>());
    fmt::print("\n");
  }
  return 0;
}
#else
int run_devices(const DevicesOptions&) {
  fmt::print(stderr, "strata devices: this build has no CUDA support (configure with -DSTRATA_CUDA=ON)\n");
  return 1;
}
#endif

}  // namespace

CommandMain add_devices_command(CLI::App& app) {
  app.description("List the GPUs and, with --measure, their memory-read bandwidth");
  auto opt = std::make_shared<DevicesOptions>();
  app.add_flag("--measure", opt->measure, "Measure each device's memory-read bandwidth");
  app.add_option("--probe-gib", opt->probe_gib, "Probe buffer size in GiB (well over the L2)")->check(CLI::Range(0.0625, 64.0));
  app.add_flag("--json", opt->json, "Print JSON");
  return [opt] { return run_devices(*opt); };
}

}  // namespace strata::cli

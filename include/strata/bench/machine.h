// The machine a bench ran on and the process's memory high-water mark: every result names
// its CPU (DESIGN principle 5), and peak RAM is read from the kernel, not estimated.
#pragma once

#include <cstdint>
#include <string>

namespace strata::bench {

struct MachineInfo {
  std::string cpu_model;        // /proc/cpuinfo "model name"
  int cores = 0;                // physical cores (distinct physical id / core id pairs)
  int threads = 0;              // logical CPUs online
  uint64_t llc_bytes = 0;       // the last-level cache (sysfs), 0 when unknown
  uint64_t ram_bytes = 0;       // MemTotal
  std::string kernel;           // uname -sr
  std::string hostname;
};

MachineInfo probe_machine();

// VmHWM of /proc/self/status in bytes (0 when unreadable).
uint64_t peak_ram_bytes();
// Resets VmHWM to the current RSS (writes "5" to /proc/self/clear_refs, Linux >= 4.0), so a
// freed probe buffer does not count as the model's peak. False when the kernel refuses.
bool reset_peak_ram();

// User + system CPU seconds of this process, all threads (getrusage). Against wall time it
// shows how much of the machine the bench actually got (other load on shared hosts).
double process_cpu_seconds();
// The 1-minute load average (/proc/loadavg), -1 when unreadable.
double load_average();

// "2026-11-30T12:34:56Z" (UTC, seconds).
std::string utc_timestamp();

// This process's argv from /proc/self/cmdline, shell-quoted where needed.
std::string own_command_line();

}  // namespace strata::bench

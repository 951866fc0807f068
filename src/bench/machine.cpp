// Machine description from /proc and sysfs (Linux), read once per bench.
#include "strata/bench/machine.h"

#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cctype>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>

#include <fmt/format.h>

namespace strata::bench {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// "105 MiB" style sizes of sysfs cache entries ("108544K").
uint64_t parse_cache_size(const std::string& text) {
  uint64_t v = 0;
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) v = v * 10 + (text[i++] - '0');
  if (i < text.size() && (text[i] == 'K' || text[i] == 'k')) v <<= 10;
  if (i < text.size() && (text[i] == 'M' || text[i] == 'm')) v <<= 20;
  return v;
}

// The largest-level unified or data cache of cpu0.
uint64_t llc_bytes() {
  int best_level = 0;
  uint64_t best = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", index);
    const std::string level = trim(read_file(dir + "level"));
    if (level.empty()) break;
    const std::string type = trim(read_file(dir + "type"));
    if (type == "Instruction") continue;
    const int l = std::atoi(level.c_str());
    if (l >= best_level) {
      best_level = l;
      best = parse_cache_size(trim(read_file(dir + "size")));
    }
  }
  return best;
}

void read_cpuinfo(MachineInfo& m) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  std::set<std::pair<int, int>> cores;
  int physical = 0;
  while (std::getline(f, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (key == "model name" && m.cpu_model.empty()) m.cpu_model = value;
    if (key == "physical id") physical = std::atoi(value.c_str());
    if (key == "core id") cores.insert({physical, std::atoi(value.c_str())});
  }
  m.cores = static_cast<int>(cores.size());
}

uint64_t meminfo_kib(std::string_view key) {
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0 && line.size() > key.size() && line[key.size()] == ':') {
      return std::strtoull(line.c_str() + key.size() + 1, nullptr, 10);
    }
  }
  return 0;
}

std::string shell_quote(const std::string& arg) {
  if (arg.empty()) return "''";
  bool plain = true;
  for (char ch : arg) {
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || std::string_view("-_./=:,+@%").find(ch) != std::string_view::npos)) {
      plain = false;
    }
  }
  if (plain) return arg;
  std::string out = "'";
  for (char ch : arg) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

}  // namespace

MachineInfo probe_machine() {
  MachineInfo m;
  read_cpuinfo(m);
  m.threads = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (m.threads <= 0) m.threads = static_cast<int>(std::thread::hardware_concurrency());
  if (m.cores == 0) m.cores = m.threads;  // VMs without core ids: count what runs
  m.llc_bytes = llc_bytes();
  m.ram_bytes = meminfo_kib("MemTotal") << 10;
  utsname u{};
  if (uname(&u) == 0) {
    m.kernel = fmt::format("{} {}", u.sysname, u.release);
    m.hostname = u.nodename;
  }
  return m;
}

uint64_t peak_ram_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) << 10;
  }
  return 0;
}

bool reset_peak_ram() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

double process_cpu_seconds() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0.0;
  const auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return s(u.ru_utime) + s(u.ru_stime);
}

double load_average() {
  double v = -1.0;
  std::ifstream f("/proc/loadavg");
  if (!(f >> v)) return -1.0;
  return v;
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string own_command_line() {
  const std::string raw = read_file("/proc/self/cmdline");
  std::string out;
  size_t start = 0;
  while (start < raw.size()) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    if (!out.empty()) out += ' ';
    out += shell_quote(raw.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace strata::bench

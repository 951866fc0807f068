#include "strata/cuda/switches.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "strata/common/env.h"

namespace strata::cuda {
namespace {

// A 0/1 switch.
Status read_flag(const std::function<const char*(const char*)>& lookup, const char* name, bool& out) {
  auto v = parse_env_int(name, lookup(name), 0, 1);
  if (!v) return v.status();
  if (v->has_value()) out = **v == 1;
  return Status::ok_status();
}

struct Parsed {
  Switches values;
  Status error;
};

const Parsed& parsed() {
  static const Parsed p = [] {
    Parsed r;
    auto s = parse_switches([](const char* name) { return std::getenv(name); });
    if (s) {
      r.values = *s;
    } else {
      r.error = s.status();
    }
    return r;
  }();
  return p;
}

}  // namespace

Result<Switches> parse_switches(const std::function<const char*(const char*)>& lookup) {
  Switches s;
  STRATA_TRY(read_flag(lookup, "STRATA_PDL", s.pdl));
  STRATA_TRY(read_flag(lookup, "STRATA_SIDE_STREAM", s.side_stream));
  STRATA_TRY(read_flag(lookup, "STRATA_GROUPED_DIRECT", s.grouped_direct));
  STRATA_TRY(read_flag(lookup, "STRATA_MMVQ_MMA", s.mmvq_mma));
  STRATA_TRY(read_flag(lookup, "STRATA_DIRECT_STAGE", s.direct_stage));
  auto warps = parse_env_int("STRATA_DIRECT_WARPS", lookup("STRATA_DIRECT_WARPS"), 5, 8);
  if (!warps) return warps.status();
  if (warps->has_value() && **warps != 5 && **warps != 8)
    return Status::error("STRATA_DIRECT_WARPS: expected 5 or 8, got \"" + std::string(lookup("STRATA_DIRECT_WARPS")) +
                         "\"");
  s.direct_wide_t1 = warps->value_or(5) == 8;
  STRATA_TRY(read_flag(lookup, "STRATA_HC_POST_BLOCKED", s.hc_post_blocked));
  auto splits = parse_env_int("STRATA_ATTN_SPLITS", lookup("STRATA_ATTN_SPLITS"), 1, kMaxAttnSplits);
  if (!splits) return splits.status();
  s.attn_splits = splits->value_or(0);
  if (const char* v = lookup("STRATA_UNFUSE"); v != nullptr && v[0] != '\0') {
    const std::string_view list(v);
    for (size_t at = 0; at <= list.size();) {
      const size_t end = std::min(list.find(',', at), list.size());
      const std::string_view item = list.substr(at, end - at);
      if (item == "gdn-norm") {
        s.unfuse_gdn_norm = true;
      } else if (item == "gdn-gates") {
        s.unfuse_gdn_gates = true;
      } else if (item == "combine") {
        s.unfuse_combine = true;
      } else if (item == "shared-down") {
        s.unfuse_shared_down = true;
      } else {
        return Status::error("STRATA_UNFUSE: expected a comma-separated list of gdn-norm, gdn-gates, combine and shared-down, got \"" +
                             std::string(list) + "\"");
      }
      at = end + 1;
    }
  }
  return s;
}

const Switches& switches() { return parsed().values; }

Status check_switches() { return parsed().error; }

}  // namespace strata::cuda

// Named stage outputs of the reference forward (STYLE habit 6). The forward calls the sink,
// when one is given, after each stage with the stage's output rows, so `strata parity` and
// debugging can compare dumps by (stage, block, position). Names per block, in model order:
//   ple, hc_attn_mix, gdn | qsa, hc_attn_combine, hc_ffn_mix, router, experts, shared,
//   hc_ffn_combine
// and globally: embed (block -1), output_mix and head (block -1 after the trunk), and for the
// MTP block: mtp_input, then the block stages with the MTP block index, mtp_mix, mtp_head.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

namespace strata::reference {

// rows: n_rows rows of one stage output, positions pos0 .. pos0 + n_rows - 1.
using StageSink = std::function<void(std::string_view stage, int block, int64_t pos0, int64_t n_rows,
                                     std::span<const float> rows)>;

inline void emit_stage(const StageSink* sink, std::string_view stage, int block, int64_t pos0, int64_t n_rows,
                       std::span<const float> rows) {
  if (sink && *sink) (*sink)(stage, block, pos0, n_rows, rows);
}

}  // namespace strata::reference

// The architecture of one qwen4exp file, declared once as data (STYLE habit 15): the mixer
// of every block, which block carries the PLE injection, which block is the MTP head, and
// where each block's per-sequence state lives. Built from the GGUF metadata by load_config;
// every runner (reference, CUDA) consumes it and nothing re-derives it.
//
// State slot layout (written down here because runners allocate from it):
//   - GDN blocks are numbered 0..n_gdn-1 in block order: their conv + recurrent state slot.
//   - Attention blocks of the trunk are numbered 0..n_attn-1 in block order: their K/V and
//     index-key cache slot. The MTP block has its own cache (not counted in n_attn).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/common/status.h"

namespace strata::model {

enum class Mixer : uint8_t { Gdn, Attention };

struct BlockPlan {
  Mixer mixer = Mixer::Gdn;
  bool ple = false;            // PLE injection before this block's hc_attn (trunk GDN block only)
  bool mtp = false;            // the trailing MTP block (not part of the trunk loop)
  uint32_t compress_ratio = 0; // QSA block size of this attention block; 0 = dense attention
  int32_t slot = -1;           // GDN slot or attention cache slot (see above); -1 for MTP
};

struct LayerPlan {
  uint32_t n_blocks = 0;       // qwen4exp.block_count (MTP block included)
  uint32_t n_trunk = 0;        // blocks run for every token
  uint32_t n_gdn = 0;          // trunk GDN blocks
  uint32_t n_attn = 0;         // trunk attention blocks
  int32_t ple_block = -1;      // the PLE block, -1 when the file has no PLE
  int32_t mtp_block = -1;      // the MTP block, -1 when the file has none
  std::vector<BlockPlan> blocks;

  bool has_mtp() const { return mtp_block >= 0; }
  bool has_ple() const { return ple_block >= 0; }
};

// Inputs of the plan, as read from metadata (already type-checked by load_config).
struct LayerPlanInputs {
  uint32_t block_count = 0;
  uint32_t nextn_predict_layers = 0;
  uint32_t full_attention_interval = 4;
  std::vector<bool> recurrent_layers;     // attention.recurrent_layers when present (overrides the interval)
  std::vector<int64_t> compress_ratios;   // attention.compress_ratios, empty when absent
  bool qsa = false;                       // the indexer keys are present
  std::vector<int64_t> ple_layers;        // ple.layers (0-based), empty when absent
  std::string file;                       // for messages
};

// Builds and validates the plan; errors read "qwen4exp: expected <key>=<..>, got <..> in <file>".
Result<LayerPlan> build_layer_plan(const LayerPlanInputs& in);

}  // namespace strata::model

// Builds the LayerPlan (see the header for the slot layout). The checks here are the ones
// that need the layer kinds: a PLE block must be a trunk GDN block (its conv history lives
// with the recurrent state), and when the indexer is configured every trunk attention block
// must carry the same non-zero compress ratio — a converter that did not recognise the
// layer-type spelling writes all zeros, which would silently run dense attention.
#include "strata/model/layer_plan.h"

#include <fmt/format.h>

namespace strata::model {

namespace {

Status plan_error(const LayerPlanInputs& in, const std::string& key, const std::string& want,
                  const std::string& got) {
  return Status::error(fmt::format("qwen4exp: expected qwen4exp.{}={}, got {} in {}", key, want, got, in.file));
}

std::string list_str(const std::vector<int64_t>& v) {
  return fmt::format("[{}]", fmt::join(v, ","));
}

}  // namespace

Result<LayerPlan> build_layer_plan(const LayerPlanInputs& in) {
  LayerPlan plan;
  plan.n_blocks = in.block_count;
  if (in.nextn_predict_layers > 1) {
    return plan_error(in, "nextn_predict_layers", "0 or 1", std::to_string(in.nextn_predict_layers));
  }
  if (in.block_count <= in.nextn_predict_layers) {
    return plan_error(in, "block_count", fmt::format("> nextn_predict_layers ({})", in.nextn_predict_layers),
                      std::to_string(in.block_count));
  }
  plan.n_trunk = in.block_count - in.nextn_predict_layers;
  if (!in.recurrent_layers.empty() && in.recurrent_layers.size() != in.block_count) {
    return plan_error(in, "attention.recurrent_layers", fmt::format("{} entries", in.block_count),
                      std::to_string(in.recurrent_layers.size()));
  }
  if (in.recurrent_layers.empty() && in.full_attention_interval == 0) {
    return plan_error(in, "full_attention_interval", "> 0", "0");
  }
  if (!in.compress_ratios.empty() && in.compress_ratios.size() != in.block_count) {
    return plan_error(in, "attention.compress_ratios", fmt::format("{} entries (block_count)", in.block_count),
                      fmt::format("{} entries", in.compress_ratios.size()));
  }

  plan.blocks.resize(in.block_count);
  uint32_t qsa_ratio = 0;
  for (uint32_t i = 0; i < in.block_count; ++i) {
    BlockPlan& b = plan.blocks[i];
    b.mtp = i >= plan.n_trunk;
    const bool recurrent = b.mtp ? false
                           : !in.recurrent_layers.empty() ? bool(in.recurrent_layers[i])
                                                          : (i + 1) % in.full_attention_interval != 0;
    b.mixer = recurrent ? Mixer::Gdn : Mixer::Attention;
    const int64_t ratio = in.compress_ratios.empty() ? 0 : in.compress_ratios[i];
    if (ratio < 0) return plan_error(in, "attention.compress_ratios", ">= 0 entries", list_str(in.compress_ratios));
    if (b.mixer == Mixer::Gdn && ratio != 0) {
      return plan_error(in, "attention.compress_ratios", fmt::format("0 for GDN block {}", i), list_str(in.compress_ratios));
    }
    if (b.mixer == Mixer::Attention && !b.mtp) {
      if (in.qsa && ratio == 0) {
        return plan_error(in, "attention.compress_ratios",
                          fmt::format("a ratio > 0 for attention block {} (indexer keys are present)", i),
                          list_str(in.compress_ratios));
      }
      if (!in.qsa && ratio != 0) {
        return plan_error(in, "attention.indexer.head_count", fmt::format("present (block {} has ratio {})", i, ratio),
                          "missing");
      }
      if (ratio != 0 && qsa_ratio != 0 && ratio != qsa_ratio) {
        return plan_error(in, "attention.compress_ratios", "one common ratio for all attention blocks",
                          list_str(in.compress_ratios));
      }
      if (ratio != 0) qsa_ratio = static_cast<uint32_t>(ratio);
    }
    if (b.mtp) {
      // llama.cpp writes 0 for the MTP block; the reference gives the MTP attention the
      // trunk's ratio when its indexer tensors are bound (spec §9: it has its own QSA).
      if (ratio != 0 && qsa_ratio != 0 && ratio != qsa_ratio) {
        return plan_error(in, "attention.compress_ratios", fmt::format("0 or {} for MTP block {}", qsa_ratio, i),
                          list_str(in.compress_ratios));
      }
      b.compress_ratio = qsa_ratio;
      plan.mtp_block = static_cast<int32_t>(i);
    } else {
      b.compress_ratio = static_cast<uint32_t>(ratio);
      b.slot = static_cast<int32_t>(b.mixer == Mixer::Gdn ? plan.n_gdn++ : plan.n_attn++);
    }
  }

  if (in.ple_layers.size() > 1) {
    return plan_error(in, "ple.layers", "at most one PLE layer", list_str(in.ple_layers));
  }
  for (int64_t id : in.ple_layers) {
    if (id < 0 || id >= static_cast<int64_t>(plan.n_trunk)) {
      return plan_error(in, "ple.layers", fmt::format("a trunk block in [0, {})", plan.n_trunk), list_str(in.ple_layers));
    }
    if (plan.blocks[id].mixer != Mixer::Gdn) {
      return plan_error(in, "ple.layers", "a GDN block", fmt::format("{} (block {} is full attention)",
                                                                     list_str(in.ple_layers), id));
    }
    plan.blocks[id].ple = true;
    plan.ple_block = static_cast<int32_t>(id);
  }
  return plan;
}

}  // namespace strata::model

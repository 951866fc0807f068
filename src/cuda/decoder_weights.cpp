// The decoder's weights: what the kernels support (check_config), and the upload of every
// trunk tensor into one device arena through double-buffered pinned staging. Matrices keep
// their file type; the small vectors the kernels read as f32 (model::Tensor::f32's set) are
// converted on the host. The n-gram table stays on the host (decoder.cpp reads its rows).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "decoder_internal.h"
#include "strata/cuda/get_rows.h"
#include "strata/quant/dequant.h"

namespace strata::cuda {
namespace {

std::string tensor_name(const model::Tensor& t) { return t.name ? *t.name : std::string("<unnamed tensor>"); }

std::string type_str(quant::Type t) {
  const auto info = quant::type_info(t);
  return info ? std::string(info->name) : "type " + std::to_string(static_cast<uint32_t>(t));
}

Status config_error(const std::string& field, const std::string& want, int64_t got) {
  return Status::error("cuda decoder: expected " + field + " " + want + ", got " + std::to_string(got));
}

// A mat-vec input width: mmvq and quantize_q8_1 take rows of whole 32-value blocks.
Status check_width(const std::string& field, int64_t v) {
  if (v <= 0 || v % 32 != 0) return config_error(field, "a positive multiple of 32 (mat-vec input width)", v);
  return Status::ok_status();
}

// Bytes a tensor's producer writes: [offset, offset + n) of its upload image into dst.
using Producer = std::function<Status(int64_t offset, int64_t n, uint8_t* dst)>;

// Copies producer output into device memory through two pinned chunks: the host fills one
// while the previous one's copy runs.
class StagedUpload {
 public:
  StagedUpload(cudaStream_t stream, int threads) : stream_(stream), threads_(threads) {}
  StagedUpload(const StagedUpload&) = delete;
  StagedUpload& operator=(const StagedUpload&) = delete;
  ~StagedUpload() {
    for (cudaEvent_t& e : events_)
      if (e) cudaEventDestroy(e);
  }

  Status init(int64_t chunk) {
    chunk_ = chunk;
    for (int i = 0; i < 2; ++i) {
      STRATA_TRY(buffers_[i].alloc(chunk, "weight upload staging"));
      DECODER_CUDA_TRY(cudaEventCreateWithFlags(&events_[i], cudaEventDisableTiming));
    }
    return Status::ok_status();
  }

  Status write(uint8_t* dst, int64_t n, const Producer& produce) {
    int64_t done = 0;
    while (done < n) {
      if (used_ == chunk_) STRATA_TRY(flip());
      const int64_t len = std::min(n - done, chunk_ - used_);
      uint8_t* host = buffers_[cur_].get() + used_;
      STRATA_TRY(produce_parallel(produce, done, len, host));
      DECODER_CUDA_TRY(cudaMemcpyAsync(dst + done, host, static_cast<size_t>(len), cudaMemcpyHostToDevice, stream_));
      used_ += len;
      done += len;
    }
    return Status::ok_status();
  }

  Status finish() {
    DECODER_CUDA_TRY(cudaStreamSynchronize(stream_));
    return Status::ok_status();
  }

 private:
  // The other chunk becomes current once the copies that read it have finished.
  Status flip() {
    DECODER_CUDA_TRY(cudaEventRecord(events_[cur_], stream_));
    cur_ ^= 1;
    DECODER_CUDA_TRY(cudaEventSynchronize(events_[cur_]));
    used_ = 0;
    return Status::ok_status();
  }

  // Splits a large piece over the upload threads (the synthetic generator is the slow part).
  Status produce_parallel(const Producer& produce, int64_t offset, int64_t n, uint8_t* dst) const {
    constexpr int64_t kMinPerThread = int64_t{4} << 20;
    const int64_t parts = std::clamp<int64_t>(n / kMinPerThread, 1, threads_);
    if (parts == 1) return produce(offset, n, dst);
    std::vector<Status> st(static_cast<size_t>(parts));
    std::vector<std::thread> pool;
    for (int64_t i = 0; i < parts; ++i) {
      const int64_t b = n * i / parts, e = n * (i + 1) / parts;
      pool.emplace_back([&, i, b, e] { st[static_cast<size_t>(i)] = produce(offset + b, e - b, dst + b); });
    }
    for (std::thread& t : pool) t.join();
    for (const Status& s : st) STRATA_TRY(s);
    return Status::ok_status();
  }

  cudaStream_t stream_;
  int threads_;
  int64_t chunk_ = 0, used_ = 0;
  int cur_ = 0;
  PinnedMemory buffers_[2];
  cudaEvent_t events_[2] = {nullptr, nullptr};
};

// One tensor of the arena: where it goes and how its bytes are made.
struct UploadItem {
  const model::Tensor* tensor = nullptr;
  bool as_f32 = false;   // converted to f32 on the host
  int64_t offset = 0;    // in the arena
  int64_t bytes = 0;
  DTensor* dtensor = nullptr;      // set to the device copy
  const float** f32 = nullptr;     // or this pointer
};

// Collects the tensors of the trunk into items, checking each against the kernels.
class UploadPlan {
 public:
  std::vector<UploadItem> items;
  int64_t total = 0;

  // A weight for linear() (or get_rows when `gather`).
  Status matrix(const model::Tensor& t, DTensor& out, bool gather = false) {
    STRATA_TRY(describe_matrix(t, out, gather));
    add({&t, false, 0, static_cast<int64_t>(t.row_bytes) * t.rows(), &out, nullptr});
    return Status::ok_status();
  }

  // One concatenated matrix `cat` of weights that read the same input: the parts' rows back to
  // back (GGUF rows are packed, so the concatenation's rows are exactly the parts' rows) and each
  // part a view into it, so nothing is stored twice and one mat-vec computes every part. When the
  // parts differ in type or row length, or a part would start off the 16 bytes mmvq wants, they
  // are planned on their own and `cat` stays empty (callers then launch the parts).
  struct Part {
    const model::Tensor* tensor;
    DTensor* out;
    bool vector_row;  // a vector used as a one-row matrix (describe_vector_matrix)
  };
  Status concat(std::initializer_list<Part> parts, DTensor& cat) {
    for (const Part& p : parts)
      STRATA_TRY(p.vector_row ? describe_vector_matrix(*p.tensor, *p.out) : describe_matrix(*p.tensor, *p.out));
    const DTensor& first = *parts.begin()->out;
    bool same = true;
    for (const Part& p : parts) {
      const DTensor& d = *p.out;
      same = same && d.type == first.type && d.cols == first.cols && d.row_bytes == first.row_bytes &&
             (d.rows * d.row_bytes) % 16 == 0;
    }
    cat = DTensor{};
    if (same) {
      cat.type = first.type;
      cat.cols = first.cols;
      cat.row_bytes = first.row_bytes;
      for (const Part& p : parts) cat.rows += p.out->rows;
      views.push_back({&cat, parts.begin()->out});
    }
    for (const Part& p : parts) {
      const int64_t bytes = p.out->rows * p.out->row_bytes;
      add({p.tensor, p.vector_row && p.tensor->type != p.out->type, 0, bytes, p.out, nullptr}, /*packed=*/same);
    }
    if (same) total = align_up(total, kDeviceAlign);
    return Status::ok_status();
  }

  // Concatenations whose data is their first part's (set once the arena exists).
  struct View {
    DTensor* cat;
    const DTensor* first;
  };
  std::vector<View> views;

 private:
  Status describe_matrix(const model::Tensor& t, DTensor& out, bool gather = false) const {
    if (!t) return Status::error("cuda decoder: a required tensor is missing from the weights");
    if (gather ? !get_rows_supports(t.type) : !mmvq_supports(t.type)) {
      return Status::error("cuda decoder: " + tensor_name(t) + " has type " + type_str(t.type) + ", which the CUDA " +
                           (gather ? "get_rows" : "mat-vec") + " kernels do not take");
    }
    if (t.cols() % 32 != 0) {
      return Status::error("cuda decoder: " + tensor_name(t) + " rows have " + std::to_string(t.cols()) +
                           " values; the CUDA kernels need a multiple of 32");
    }
    out.type = t.type;
    out.rows = t.rows();
    out.cols = t.cols();
    out.row_bytes = static_cast<int64_t>(t.row_bytes);
    return Status::ok_status();
  }

  // A float vector keeps its type, so that it can share a concatenation with a matrix of that
  // type (the shared gate's row after a BF16 router: one mat-vec instead of a second, one-CTA
  // launch for its logit); any other type is converted to f32 on the host (as_f32 in concat).
  Status describe_vector_matrix(const model::Tensor& t, DTensor& out) const {
    if (!t) return Status::error("cuda decoder: a required gate vector is missing from the weights");
    const bool own = t.type == quant::Type::F32 || t.type == quant::Type::F16 || t.type == quant::Type::BF16;
    out.type = own ? t.type : quant::Type::F32;
    out.rows = 1;
    out.cols = t.n_elements();
    out.row_bytes = out.cols * static_cast<int64_t>(out.type == quant::Type::F32 ? sizeof(float) : sizeof(uint16_t));
    return Status::ok_status();
  }

 public:
  // A small tensor the kernels read as f32.
  Status vector(const model::Tensor& t, const float*& out) {
    if (!t) return Status::error("cuda decoder: a required norm/conv/gate vector is missing from the weights");
    add({&t, true, 0, t.n_elements() * static_cast<int64_t>(sizeof(float)), nullptr, &out});
    return Status::ok_status();
  }

  // A vector used as a one-row f32 matrix (the shared expert's gate).
  Status vector_matrix(const model::Tensor& t, DTensor& out) {
    STRATA_TRY(describe_vector_matrix(t, out));
    add({&t, true, 0, out.row_bytes, &out, nullptr});
    return Status::ok_status();
  }

 private:
  // `packed`: the next item follows this one directly (a part of a concatenation).
  void add(UploadItem item, bool packed = false) {
    item.offset = total;
    total = packed ? total + item.bytes : align_up(total + item.bytes, kDeviceAlign);
    items.push_back(item);
  }
};

Status plan_hc(UploadPlan& p, const model::Tensor& norm, const model::Tensor& down, const model::Tensor& up,
               const model::Tensor* inject, HcSite& out) {
  STRATA_TRY(p.vector(norm, out.norm));
  STRATA_TRY(p.matrix(down, out.down));
  STRATA_TRY(p.matrix(up, out.up));
  if (inject) STRATA_TRY(p.matrix(*inject, out.inject));
  return Status::ok_status();
}

Status plan_block(UploadPlan& p, const model::ModelConfig& c, const model::Block& b, DevBlock& out) {
  STRATA_TRY(plan_hc(p, b.hc_attn_norm, b.hc_attn_down, b.hc_attn_up, &b.hc_attn_inject, out.attn_hc));
  STRATA_TRY(plan_hc(p, b.hc_ffn_norm, b.hc_ffn_down, b.hc_ffn_up, &b.hc_ffn_inject, out.ffn_hc));
  if (out.plan.mixer == model::Mixer::Gdn) {
    STRATA_TRY(p.concat({{&b.attn_qkv, &out.qkv, false}, {&b.attn_gate, &out.z_proj, false}}, out.qkvz));
    STRATA_TRY(p.concat({{&b.ssm_beta, &out.beta, false}, {&b.ssm_alpha, &out.alpha, false}}, out.ba));
    STRATA_TRY(p.matrix(b.ssm_out, out.ssm_out));
    STRATA_TRY(p.vector(b.ssm_conv1d, out.conv_w));
    STRATA_TRY(p.vector(b.ssm_a, out.ssm_a));
    STRATA_TRY(p.vector(b.ssm_dt_bias, out.dt_bias));
    STRATA_TRY(p.vector(b.ssm_norm, out.ssm_norm));
  } else {
    STRATA_TRY(p.concat({{&b.attn_q, &out.q, false}, {&b.attn_k, &out.k, false}, {&b.attn_v, &out.v, false}},
                        out.qkv_attn));
    STRATA_TRY(p.matrix(b.attn_output, out.o));
    STRATA_TRY(p.vector(b.attn_q_norm, out.q_norm));
    STRATA_TRY(p.vector(b.attn_k_norm, out.k_norm));
    // The reference's rule: sparse only with a compress ratio and the indexer tensors.
    if (out.plan.compress_ratio > 0 && b.has_indexer()) {
      STRATA_TRY(p.concat({{&b.indexer_q_proj, &out.iq, false}, {&b.indexer_k_proj, &out.ik, false}}, out.idx_qk));
      STRATA_TRY(p.vector(b.indexer_q_norm, out.iq_norm));
      STRATA_TRY(p.vector(b.indexer_k_norm, out.ik_norm));
    }
  }
  STRATA_TRY(p.concat({{&b.ffn_gate_inp, &out.router, false}, {&b.ffn_gate_inp_shexp, &out.sh_gate_inp, true}},
                      out.router_gi));
  ExpertWeights& e = out.experts;
  e.n_expert = static_cast<int>(c.n_expert);
  e.n_ff = static_cast<int>(b.n_ff_exp);
  e.n_embd = static_cast<int>(c.n_embd);
  if (b.ffn_gate_up_exps) {
    STRATA_TRY(p.matrix(b.ffn_gate_up_exps, e.gate_up));
  } else {
    STRATA_TRY(p.matrix(b.ffn_gate_exps, e.gate));
    STRATA_TRY(p.matrix(b.ffn_up_exps, e.up));
  }
  STRATA_TRY(p.matrix(b.ffn_down_exps, e.down));
  STRATA_TRY(p.concat({{&b.ffn_gate_shexp, &out.sh_gate, false}, {&b.ffn_up_shexp, &out.sh_up, false}}, out.sh_gate_up));
  STRATA_TRY(p.matrix(b.ffn_down_shexp, out.sh_down));
  if (out.plan.ple) {
    STRATA_TRY(p.matrix(b.ple_key, out.ple_key));
    STRATA_TRY(p.matrix(b.ple_value, out.ple_value));
    STRATA_TRY(p.vector(b.ple_norm_key, out.ple_norm_key));
    STRATA_TRY(p.vector(b.ple_norm_query, out.ple_norm_query));
    STRATA_TRY(p.vector(b.ple_norm_conv, out.ple_norm_conv));
    STRATA_TRY(p.vector(b.ple_conv1d, out.ple_conv));
  }
  return Status::ok_status();
}

// The MTP head (spec/model.md §9): its block as a trunk attention block on the cache slot past
// the trunk's, plus eh_proj, the two input norms and its own output mixer.
Status plan_mtp(UploadPlan& p, const model::ModelConfig& c, const model::Weights& weights, DevWeights& w) {
  const int b = c.plan.mtp_block;
  const model::BlockPlan& bp = c.plan.blocks[static_cast<size_t>(b)];
  // The MTP block runs the trunk's attention ops on their scratch, which exists (and whose
  // shapes were checked) only with a trunk attention block.
  if (c.plan.n_attn == 0 || bp.mixer != model::Mixer::Attention)
    return Status::error("cuda decoder: the MTP block needs an attention mixer and a trunk with attention blocks");
  STRATA_TRY(check_width("expert_feed_forward_length of the MTP block " + std::to_string(b), c.n_ff_exp[b]));
  const model::Block& blk = weights.blocks[static_cast<size_t>(b)];
  w.mtp = std::make_unique<DevMtp>();
  DevMtp& m = *w.mtp;
  m.block.index = b;
  m.block.plan = bp;
  m.block.plan.slot = static_cast<int32_t>(c.plan.n_attn);
  STRATA_TRY(plan_block(p, c, blk, m.block));
  STRATA_TRY(p.matrix(blk.nextn_eh_proj, m.eh_proj));
  if (m.eh_proj.cols != 2 * static_cast<int64_t>(c.n_embd) || m.eh_proj.rows != static_cast<int64_t>(c.n_embd))
    return Status::error("cuda decoder: nextn.eh_proj.weight is " + std::to_string(m.eh_proj.rows) + " x " +
                         std::to_string(m.eh_proj.cols) + ", expected H x 2H");
  STRATA_TRY(p.vector(blk.nextn_enorm, m.enorm));
  STRATA_TRY(p.vector(blk.nextn_hnorm, m.hnorm));
  return plan_hc(p, blk.nextn_hc_head_norm, blk.nextn_hc_head_down, blk.nextn_hc_head_up, nullptr, m.head_hc);
}

// The raw bytes of [offset, offset + n) of a tensor: from the fill or the mapped file.
Status raw_bytes(const model::Tensor& t, const WeightFill& fill, int64_t offset, int64_t n, uint8_t* dst) {
  if (fill) return fill(t, static_cast<uint64_t>(offset), static_cast<uint64_t>(n), dst);
  if (!t.data) return Status::error("cuda decoder: " + tensor_name(t) + " has no data and no fill was given");
  std::memcpy(dst, t.data + offset, static_cast<size_t>(n));
  return Status::ok_status();
}

// A small tensor as f32 on the host. Tensor::f32 is only valid for the mapped file's bytes.
Result<std::vector<float>> as_f32(const model::Tensor& t, const WeightFill& fill) {
  const int64_t n = t.n_elements();
  std::vector<float> out(static_cast<size_t>(n));
  if (!fill && t.f32) {
    std::copy_n(t.f32, n, out.data());
    return out;
  }
  std::vector<uint8_t> raw(static_cast<size_t>(static_cast<int64_t>(t.row_bytes) * t.rows()));
  STRATA_TRY(raw_bytes(t, fill, 0, static_cast<int64_t>(raw.size()), raw.data()));
  Status st = quant::dequantize_row(t.type, raw.data(), out.data(), n);
  if (!st.ok()) return Status::error("cuda decoder: " + tensor_name(t) + ": " + st.message());
  return out;
}

}  // namespace

Status Decoder::Impl::check_config() const {
  const model::ModelConfig& c = config;
  const DecoderOptions& o = options;
  if (o.max_window < 1 || o.max_window > kMaxWindowRows)
    return config_error("DecoderOptions::max_window", "1 .. " + std::to_string(kMaxWindowRows), o.max_window);
  if (o.max_ctx < o.max_window) return config_error("DecoderOptions::max_ctx", ">= max_window", o.max_ctx);
  STRATA_TRY(check_width("embedding_length (H)", c.n_embd));
  STRATA_TRY(check_width("hyper_connection.count * H (the wide width)", c.n_wide()));
  STRATA_TRY(check_width("hyper_connection.low_rank", c.hc_rank));
  STRATA_TRY(check_width("expert_shared_feed_forward_length", c.n_ff_shexp));
  if (c.n_expert < 1 || c.n_expert > static_cast<uint32_t>(kRouterMaxExperts))
    return config_error("expert_count", "1 .. " + std::to_string(kRouterMaxExperts) + " (the router keeps a row in registers)",
                        c.n_expert);
  if (c.n_expert_used < 1 || c.n_expert_used > c.n_expert)
    return config_error("expert_used_count", "1 .. expert_count", c.n_expert_used);
  if (c.plan.n_gdn > 0) {
    STRATA_TRY(check_width("ssm.inner_size", c.ssm_inner));
    if (c.ssm_n_k_heads == 0 || c.ssm_n_v_heads % c.ssm_n_k_heads != 0)
      return config_error("ssm.time_step_rank", "a multiple of ssm.group_count", c.ssm_n_v_heads);
    if (c.ssm_conv_kernel < 1 || c.ssm_conv_kernel > static_cast<uint32_t>(kGdnMaxConvKernel))
      return config_error("ssm.conv_kernel", "1 .. " + std::to_string(kGdnMaxConvKernel), c.ssm_conv_kernel);
    if (!gdn_recurrent_supports_head_dim(static_cast<int>(c.ssm_head_dim)))
      return config_error("ssm.state_size", "a head dim gdn_recurrent supports (32, 64 or 128)", c.ssm_head_dim);
  }
  if (c.plan.n_attn > 0) {
    STRATA_TRY(check_width("attention.head_count * head_dim", static_cast<int64_t>(c.n_head) * c.head_dim));
    if (c.n_head_kv == 0 || c.n_head % c.n_head_kv != 0)
      return config_error("attention.head_count", "a multiple of attention.head_count_kv", c.n_head);
    if (c.n_head / c.n_head_kv > static_cast<uint32_t>(attn_detail::kMaxGroup))
      return config_error("attention.head_count / head_count_kv", "<= " + std::to_string(attn_detail::kMaxGroup),
                          c.n_head / c.n_head_kv);
    // attention.cu's limits (attn_prep / attn_decode check them again at launch).
    if (c.head_dim != 128 && c.head_dim != 256) return config_error("attention.key_length (head_dim)", "128 or 256", c.head_dim);
    if (c.n_rot == 0 || c.n_rot % 2 != 0 || c.n_rot > std::min<uint32_t>(128, c.head_dim))
      return config_error("rope.dimension_count", "even, positive and <= min(128, head_dim)", c.n_rot);
    if (c.qsa && (c.indexer_head_dim > 512 || c.indexer_head_dim < c.n_rot))
      return config_error("attention.indexer.head_dim", "n_rot .. 512", c.indexer_head_dim);
  }
  if (o.max_window * static_cast<int64_t>(c.n_expert_used) > kMaxExpertEntries)
    return config_error("max_window * expert_used_count", "<= " + std::to_string(kMaxExpertEntries),
                        o.max_window * static_cast<int64_t>(c.n_expert_used));
  for (uint32_t b = 0; b < c.plan.n_trunk; ++b) {
    const model::BlockPlan& p = c.plan.blocks[b];
    STRATA_TRY(check_width("expert_feed_forward_length of block " + std::to_string(b), c.n_ff_exp[b]));
    if (p.mixer == model::Mixer::Attention && p.compress_ratio > 0 && c.indexer_top_k / p.compress_ratio < 1)
      return config_error("attention.indexer.top_k", ">= the compress ratio", c.indexer_top_k);
  }
  if (c.has_ple) {
    STRATA_TRY(check_width("embedding_length_per_layer_input (ple row_dim)", c.ple.row_dim));
    if (c.ple.conv_kernel < 1) return config_error("ple.conv_kernel", ">= 1", c.ple.conv_kernel);
  }
  return Status::ok_status();
}

Status Decoder::Impl::upload(const model::Weights& weights, const WeightFill& fill_fn) {
  const auto t0 = std::chrono::steady_clock::now();
  const model::ModelConfig& c = config;
  UploadPlan plan;
  STRATA_TRY(plan.matrix(weights.token_embd, w.token_embd, /*gather=*/true));
  // A file without `output` ties the head to the embedding: one copy serves both.
  const bool tied = weights.output.name == weights.token_embd.name;
  if (tied) {
    if (!mmvq_supports(weights.token_embd.type))
      return Status::error("cuda decoder: token_embd.weight (the tied output head) has type " +
                           type_str(weights.token_embd.type) + ", which the CUDA mat-vec kernels do not take");
  } else {
    STRATA_TRY(plan.matrix(weights.output, w.output));
  }
  STRATA_TRY(plan_hc(plan, weights.output_hc_norm, weights.output_hc_down, weights.output_hc_up, nullptr, w.output_hc));
  w.blocks.resize(c.plan.n_trunk);
  for (uint32_t b = 0; b < c.plan.n_trunk; ++b) {
    DevBlock& blk = w.blocks[b];
    blk.index = static_cast<int>(b);
    blk.plan = c.plan.blocks[b];
    STRATA_TRY(plan_block(plan, c, weights.blocks[b], blk));
  }
  if (options.mtp && c.plan.has_mtp()) STRATA_TRY(plan_mtp(plan, c, weights, w));

  STRATA_TRY(weight_arena.alloc(plan.total, "the weight arena (" + std::to_string(plan.items.size()) + " tensors)"));
  const int threads = options.upload_threads > 0 ? options.upload_threads
                                                 : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  StagedUpload up(stream, threads);
  STRATA_TRY(up.init(std::min<int64_t>(int64_t{64} << 20, std::max<int64_t>(plan.total, kDeviceAlign))));
  for (const UploadItem& item : plan.items) {
    uint8_t* dst = weight_arena.get() + item.offset;
    if (item.dtensor) item.dtensor->data = dst;
    if (item.f32) *item.f32 = reinterpret_cast<const float*>(dst);
    const model::Tensor& t = *item.tensor;
    if (item.as_f32) {
      auto v = as_f32(t, fill_fn);
      if (!v) return v.status();
      const uint8_t* src = reinterpret_cast<const uint8_t*>(v->data());
      STRATA_TRY(up.write(dst, item.bytes, [&](int64_t off, int64_t n, uint8_t* out) {
        std::memcpy(out, src + off, static_cast<size_t>(n));
        return Status::ok_status();
      }));
      // The staging copy reads v's bytes only on the host side (memcpy above), so v may go now.
    } else {
      STRATA_TRY(up.write(dst, item.bytes,
                          [&](int64_t off, int64_t n, uint8_t* out) { return raw_bytes(t, fill_fn, off, n, out); }));
    }
  }
  STRATA_TRY(up.finish());
  for (const UploadPlan::View& v : plan.views) v.cat->data = v.first->data;
  if (tied) w.output = w.token_embd;
  upload_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  return Status::ok_status();
}

}  // namespace strata::cuda

// Internal to the CUDA decoder (src/cuda/decoder*.cpp): Decoder::Impl and the pieces its files
// share: device and pinned allocations, the resident weights of every block, the state and
// scratch buffers, the window sequence, the commit sequence and graph capture. Compiled by the
// host compiler only (it includes <cuda_runtime.h>, never a .cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <string_view>
#include <utility>
#include <vector>

#include "attention.h"
#include "dtensor.h"
#include "gdn.h"
#include "hc.h"
#include "head.h"
#include "launch.h"
#include "linear.h"
#include "moe.h"
#include "ple.h"
#include "strata/cuda/decoder.h"
#include "strata/reference/stage.h"

namespace strata::cuda {

// Defined in status.cpp (common.cuh declares it too, but holds device code a .cpp cannot take).
Status cuda_status(cudaError_t err, const char* what, const char* file, int line);

}  // namespace strata::cuda

// Return a Status from the enclosing function when a CUDA runtime call fails.
#define DECODER_CUDA_TRY(call)                                                                   \
  do {                                                                                           \
    ::strata::Status decoder_cuda_st_ = ::strata::cuda::cuda_status((call), #call, __FILE__, __LINE__); \
    if (!decoder_cuda_st_.ok()) return decoder_cuda_st_;                                         \
  } while (0)

namespace strata::cuda {

inline constexpr int64_t kDeviceAlign = 256;  // every tensor and buffer starts on this boundary

inline int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// One cudaMalloc, freed on destruction. alloc() names what it was for when memory runs out.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory();
  Status alloc(int64_t bytes, const std::string& what);
  uint8_t* get() const { return static_cast<uint8_t*>(p_); }
  int64_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  int64_t bytes_ = 0;
};

// Page-locked host memory (cudaMallocHost), freed on destruction.
class PinnedMemory {
 public:
  PinnedMemory() = default;
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
  ~PinnedMemory();
  Status alloc(int64_t bytes, const std::string& what);
  uint8_t* get() const { return static_cast<uint8_t*>(p_); }

 private:
  void* p_ = nullptr;
};

// Hands out 256-byte aligned pieces of one allocation. Run once with base == nullptr to learn
// the size (every pointer null), then again over the real allocation: the same calls in the same
// order give the same offsets.
class Carver {
 public:
  explicit Carver(uint8_t* base) : base_(base) {}
  template <class T>
  T* take(int64_t count) {
    off_ = align_up(off_, kDeviceAlign);
    T* p = base_ ? reinterpret_cast<T*>(base_ + off_) : nullptr;
    off_ += count * static_cast<int64_t>(sizeof(T));
    return p;
  }
  int64_t used() const { return off_; }

 private:
  uint8_t* base_ = nullptr;
  int64_t off_ = 0;
};

// An activation buffer of max_window rows: f32 rows of `cols`, and room for their q8_1 form.
struct ActBuffer {
  float* f32 = nullptr;
  void* q8 = nullptr;
  int64_t cols = 0;
  void carve(Carver& c, int64_t n_cols, int rows);
  Act act(int T) const;
};

// One hyper-connection site: grouped norm (f32), down, up, inject (empty for a final mixer).
struct HcSite {
  const float* norm = nullptr;
  DTensor down, up, inject;
};

// The resident weights of one trunk block (only those of its mixer are set).
struct DevBlock {
  int index = 0;
  model::BlockPlan plan;
  HcSite attn_hc, ffn_hc;
  // Gated DeltaNet.
  DTensor qkv, z_proj, beta, alpha, ssm_out;
  const float* conv_w = nullptr;
  const float* ssm_a = nullptr;
  const float* dt_bias = nullptr;
  const float* ssm_norm = nullptr;
  // Attention and its indexer (iq/ik empty for a dense block).
  DTensor q, k, v, o, iq, ik;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  const float* iq_norm = nullptr;
  const float* ik_norm = nullptr;
  // MoE.
  DTensor router;
  ExpertWeights experts;
  DTensor sh_gate, sh_up, sh_down;
  DTensor sh_gate_inp;  // [1, H] F32 / F16 / BF16: the shared expert's scalar gate as a one-row mat-vec
  // Concatenations of projections that read the same input, for one mat-vec each: the parts'
  // rows back to back in this order (each part above is a view into it). Empty (false) when the
  // parts differ in type or row length; the parts are then launched on their own.
  DTensor qkvz;        // GDN: qkv rows (conv_dim) then z_proj rows (inner)
  DTensor ba;          // GDN: beta rows (n_v_heads) then alpha rows (n_v_heads)
  DTensor qkv_attn;    // attention: q rows (n_head * 2 * head_dim) then k rows then v rows (kv each)
  DTensor idx_qk;      // indexer: iq rows (idx_heads * idx_head_dim) then ik rows (idx_head_dim)
  DTensor sh_gate_up;  // MoE: sh_gate rows (n_ff_shexp) then sh_up rows (n_ff_shexp)
  DTensor router_gi;   // MoE: router rows (n_expert) then the sh_gate_inp row
  // PLE.
  DTensor ple_key, ple_value;
  const float* ple_norm_key = nullptr;
  const float* ple_norm_query = nullptr;
  const float* ple_norm_conv = nullptr;
  const float* ple_conv = nullptr;
};

// The MTP draft head's resident weights (spec/model.md §9): a trunk-style attention block whose
// plan.slot is the cache slot past the trunk's (n_attn), the input norms and the fused input
// projection, and its own output mixer. The embedding and lm_head are the trunk's.
struct DevMtp {
  DevBlock block;
  DTensor eh_proj;                 // [H rows, 2H cols]: fc_embedding on columns 0..H-1, fc_hidden after
  const float* enorm = nullptr;    // [H]
  const float* hnorm = nullptr;    // [S*H], one statistic over the whole wide row
  HcSite head_hc;                  // the MTP's hyper_connection_mixer (no inject)
};

struct DevWeights {
  DTensor token_embd, output;
  HcSite output_hc;
  std::vector<DevBlock> blocks;  // the trunk, plan order (the MTP block is not uploaded)
  std::unique_ptr<DevMtp> mtp;   // set when DecoderOptions::mtp and the model has an MTP block
};

// Per GDN layer: conv history, two recurrent states and the window's conv outputs and b/a rows,
// kept for a commit of fewer rows than the window had. ssm[side] (Impl::state_side) is the
// committed state; a T > 1 window writes its last state to the other, which a commit of all T
// rows then makes the committed one (no copy), while a commit of fewer rows replays them into
// ssm[side] in place.
struct GdnLayerState {
  float* hist = nullptr;    // [(K - 1 + max_window), conv_dim]
  float* ssm[2] = {};       // [n_v_heads, d, d] each
  float* c = nullptr;       // [max_window, conv_dim]
  float* b = nullptr;       // [max_window, n_v_heads]
  float* a = nullptr;       // [max_window, n_v_heads]
};

// What forward() copies to the device before a window: one H2D copy from pinned memory.
struct WindowInputs {
  int64_t pos = 0;                     // tokens before the window (attention kernels read it)
  int32_t tokens[kMaxWindowRows] = {};
};

// Scratch of one window (max_window rows each), reused by every block.
struct Scratch {
  WindowInputs* in = nullptr;    // device copy of WindowInputs
  // Device addresses of its fields (never dereferenced on the host).
  const int32_t* tokens() const {
    return reinterpret_cast<const int32_t*>(reinterpret_cast<const uint8_t*>(in) + offsetof(WindowInputs, tokens));
  }
  const int64_t* pos() const {
    return reinterpret_cast<const int64_t*>(reinterpret_cast<const uint8_t*>(in) + offsetof(WindowInputs, pos));
  }
  float* embed = nullptr;        // [T, H]
  float* x = nullptr;            // [T, S*H] the wide residual
  ActBuffer xn;                  // [T, S*H] hc_norm output
  ActBuffer d;                   // [T, rank]
  float* inject = nullptr;       // [T, S]
  float* g = nullptr;            // [T, S*H]
  ActBuffer u;                   // [T, H] the block input
  float* alpha = nullptr;        // [T, S]
  float* hc_inv_rms = nullptr;   // [T, S] each stream's 1 / rms, hc_pre -> hc_post
  float* hc_x_alt = nullptr;     // [T, S*H] X between a block's two HC sites when hc_pre folds the attn combine
  float* hc_alpha_alt = nullptr; // [T, S] the ffn site's alpha then (hc_pre reads alpha while writing this)
  float* y = nullptr;            // [T, H] the block output
  // GDN.
  float* m = nullptr;            // [T, conv_dim]
  float* z = nullptr;            // [T, inner]
  float* o = nullptr;            // [T, inner]
  ActBuffer yn;                  // [T, inner]
  float* mz = nullptr;           // [T, conv_dim + inner] qkvz's output: m | z per row
  float* ba = nullptr;           // [T, 2 * n_v_heads] ba's output: b | a per row
  // Attention.
  float* qg = nullptr;
  float* k = nullptr;
  float* v = nullptr;
  float* iq = nullptr;
  float* ik = nullptr;
  float* q_out = nullptr;
  float* qi_out = nullptr;
  float* scores = nullptr;
  int32_t* sel = nullptr;
  int32_t* n_sel = nullptr;
  void* attn_scratch = nullptr;
  ActBuffer ao;                  // [T, n_head * head_dim]
  float* qkv_out = nullptr;      // [T, n_head * 2 * head_dim + 2 * kv] qkv_attn's output: qg | k | v
  float* idx_out = nullptr;      // [T, idx_heads * idx_head_dim + idx_head_dim] idx_qk's output: iq | ik
  // MoE.
  float* router_logits = nullptr;  // [T, n_expert]
  int32_t* ids = nullptr;          // [T, k]
  float* weights = nullptr;        // [T, k]
  ExpertScratch experts;
  uint32_t* tile_counts = nullptr;  // expert_down_combine's per-tile CTA counts: zeroed at allocation, 0 between calls
  int tile_count_cap = 0;
  float* sg = nullptr;             // [T, n_ff_shexp]
  float* su = nullptr;
  ActBuffer h;                     // [T, n_ff_shexp]
  int32_t* shared_grouping = nullptr;  // [T][4]: window size t + 1's shared_grouping_words (moe.h), set at allocation
  float** gdn_hists = nullptr;  // [n_gdn]: each GDN slot's conv history (gdn_conv_commit), set at allocation
  float* s = nullptr;              // [T, H] shared expert output before its gate
  float* gate_logit = nullptr;     // [T]
  float* shared = nullptr;         // [T, H] the gated shared output, stage dumps only
  float* router_gi_out = nullptr;  // [T, n_expert + 1] router_gi's output: logits | shared gate logit
  float* sh_gate_up_out = nullptr; // [T, 2 * n_ff_shexp] sh_gate_up's output: gate | up
  // PLE.
  void* ple_rows = nullptr;        // [T * n_heads] raw table rows, staged by forward()
  int32_t* ple_row_ids = nullptr;  // 0 .. max_window * n_heads - 1
  ActBuffer e;                     // [T, n_heads * row_dim]
  float* kp = nullptr;             // [T, S*H]
  float* vp = nullptr;             // [T, H]
  // Head.
  float* logits = nullptr;         // [T, n_vocab]
  int32_t* argmax = nullptr;       // [T]
};

// Watches a window stage by stage: stage dumps (WindowRequest::sink) or profiling. The graph
// path runs without one. `dev` holds T rows of `cols` floats.
class StageObserver {
 public:
  virtual ~StageObserver() = default;
  // True when the stage values are read (the shared stage is then materialised on its own).
  virtual bool wants_values() const = 0;
  virtual Status stage(std::string_view name, int block, const float* dev, int64_t cols, int T) = 0;
};

// Stage dumps: each stage's rows copied to the host and handed to the sink, as the reference does.
class SinkObserver final : public StageObserver {
 public:
  SinkObserver(cudaStream_t stream, int64_t pos0, const reference::StageSink& sink)
      : stream_(stream), pos0_(pos0), sink_(sink) {}
  bool wants_values() const override { return true; }
  Status stage(std::string_view name, int block, const float* dev, int64_t cols, int T) override {
    rows_.resize(static_cast<size_t>(cols * T));
    DECODER_CUDA_TRY(cudaStreamSynchronize(stream_));
    DECODER_CUDA_TRY(cudaMemcpy(rows_.data(), dev, rows_.size() * sizeof(float), cudaMemcpyDeviceToHost));
    reference::emit_stage(&sink_, name, block, pos0_, T, rows_);
    return Status::ok_status();
  }

 private:
  cudaStream_t stream_;
  int64_t pos0_;
  const reference::StageSink& sink_;
  std::vector<float> rows_;
};

// A captured and instantiated CUDA graph.
class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();
  // Captures what body() launches on `stream` and instantiates it.
  static Result<std::unique_ptr<Graph>> capture(cudaStream_t stream, const std::function<Status()>& body);
  Status launch(cudaStream_t stream) const;
  int64_t nodes() const { return nodes_; }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  int64_t nodes_ = 0;
};

// The MTP head's buffers and bookkeeping (decoder_mtp.cpp). MTP slot t holds K/V computed from
// (the trunk's pre-mixer wide row at position t, the token at t + 1) at RoPE position t; its
// attention cache is attn[mtp block's plan.slot]. Pending rows are committed trunk rows whose
// slots are not filled yet: positions n_real .. n_real + pending_rows - 1 (== pos - 1 once absorbed).
struct MtpState {
  DeviceMemory memory;               // every device buffer below
  PinnedMemory inputs;               // a step's WindowInputs (slot base, tokens), copied to Scratch::in
  float* window_x[2] = {};           // [max_window, S*H] the recorded trunk windows' rows (alternating)
  float* pending_x = nullptr;        // [pending_cap, S*H]
  float* x_in = nullptr;             // [max_window, S*H] a step's input rows
  float* chain_x = nullptr;          // [S*H] the last step's own wide output (a chain step's input)
  float* emb = nullptr;              // [max_window, H] embeddings of the next tokens
  float* en = nullptr;               // [max_window, H] after enorm
  float* en_wide = nullptr;          // [max_window, S*H] en once per stream
  float* xn = nullptr;               // [max_window, S*H] after hnorm
  ActBuffer cat;                     // [max_window * S, 2H]: row (t, s) = [en_t | xn_t,s], eh_proj's input
  int pending_cap = 0;

  int64_t n_real = 0;                // slots 0 .. n_real - 1 are trunk-fed (kept across chains)
  int64_t n = 0;                     // slots filled, a chain's speculative ones included
  int pending_rows = 0;
  std::vector<int32_t> pending_tokens;  // the tokens at the pending rows' positions
  int64_t window_pos = -1;           // the recorded window's first position; -1 when none
  int window_rows = 0;
  int window_buf = 0;                // which window_x holds it
  std::vector<int32_t> window_tokens;
  bool chain = false;                // chain_x is the output of slot n - 1
  std::vector<float> drained;        // logits of slots filled to make room, for the next mtp_sync()
  std::map<int, std::unique_ptr<Graph>> graphs;  // one step graph per T
};

// Which ops of a window a run launches. With an n-gram table the window runs as two graphs split
// at the first PLE block, so that the host hashes and stages the window's n-gram rows while the
// blocks before it run (Decoder::forward).
enum class WindowPart { All, BeforePle, FromPle };

struct Decoder::Impl {
  model::ModelConfig config;
  DecoderOptions options;
  int64_t cache_ctx = 0;                     // cache capacity: max_ctx rounded up to every compress ratio
  const model::Tensor* ple_table = nullptr;  // host-side n-gram table (rows read per window)
  WeightFill fill;                           // when set: the table rows come from it too

  cudaStream_t stream = nullptr;
  cudaStream_t copy_stream = nullptr;  // the n-gram rows' host-to-device copy (PLE models)
  cudaEvent_t rows_copied = nullptr;   // recorded on copy_stream after it
  // A second stream for independent launches of a window (decoder_window.cpp: the MoE's shared
  // expert beside the routed path): forked from `stream` (side_fork), joined back before the
  // first consumer (side_join).
  cudaStream_t side_stream = nullptr;
  cudaEvent_t side_fork = nullptr, side_join = nullptr;
  DeviceMemory weight_arena, state_memory, scratch_memory;
  PinnedMemory pinned_inputs, pinned_rows, pinned_argmax;
  int64_t ple_row_bytes = 0;

  DevWeights w;
  Scratch s;
  std::vector<GdnLayerState> gdn;    // by GDN slot
  std::vector<AttnCacheView> attn;   // by attention slot
  float* ple_hist = nullptr;         // [(history + max_window), S*H]
  GdnDims gdn_dims;
  PleDims ple_dims;

  // Sequence position and the window awaiting commit().
  int64_t pos = 0;
  int pending_rows = 0;              // T of the last forward(); 0 when committed
  std::vector<int32_t> pending_tokens;
  std::vector<int32_t> ple_context;  // the last ngram_size - 1 committed ids (host PleState)

  // The graphs read the GDN states of one side: by (T, part, state_side) and (T, n, state_side).
  std::map<std::tuple<int, WindowPart, int>, std::unique_ptr<Graph>> window_graphs;
  std::map<std::tuple<int, int, int>, std::unique_ptr<Graph>> commit_graphs;
  int state_side = 0;  // which of each GDN layer's two states is the committed one (GdnLayerState)
  int64_t launches = 0;              // op calls issued (profile's launch counts)
  int64_t upload_ms = 0;

  ~Impl();

  // decoder_weights.cpp
  Status check_config() const;
  Status upload(const model::Weights& weights, const WeightFill& fill);
  // decoder_state.cpp
  Status allocate_state_and_scratch();
  Status zero_state();
  int64_t max_attn_scratch_bytes() const;
  AttnDims attn_dims(const DevBlock& blk) const;
  // decoder_window.cpp
  Status run_window(int T, StageObserver* obs, WindowPart part = WindowPart::All);
  size_t first_ple_block() const;  // index into w.blocks; w.blocks.size() without PLE
  Status run_commit(int T, int n);
  // decoder.cpp: token ids and position (on `stream`); the window's n-gram table rows, then
  // their bytes to the device (on `on`).
  Status stage_tokens(std::span<const int32_t> tokens);
  Result<std::vector<uint64_t>> ngram_rows(std::span<const int32_t> tokens) const;
  Status stage_ngram_rows(const std::vector<uint64_t>& rows, cudaStream_t on);
  Status launch_window_graph(int T, WindowPart part);

  // The MTP head (null without one). decoder_mtp.cpp: allocation, reset and the step (its input
  // ops, then run_mtp_layer); decoder_window.cpp: its block, mixer and head over Scratch::x.
  std::unique_ptr<MtpState> mtp;
  Status allocate_mtp();
  Status zero_mtp();
  Status run_mtp_layer(int T, StageObserver* obs);
};

// True when W takes q8_1 activations (a quantized type).
inline bool takes_q8(const DTensor& w) { return w && mmvq_takes_q8_1(w.type); }

}  // namespace strata::cuda

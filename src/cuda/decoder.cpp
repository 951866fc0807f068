// cuda::Decoder: creation (checks, upload, state), forward() with its host-side inputs (token
// ids, the position, the n-gram rows), commit(), profile() and stats().
#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "decoder_internal.h"
#include "strata/cuda/device.h"
#include "strata/cuda/get_rows.h"
#include "strata/cuda/switches.h"
#include "strata/reference/ple.h"

namespace strata::cuda {
namespace {

// The profile's stage kinds, in report order, and which kind each stage name counts as.
constexpr std::array<std::string_view, 10> kKinds = {"embed", "ple", "hc_mix", "gdn", "qsa",
                                                     "hc_combine", "router", "experts", "shared", "head"};
size_t kind_of(std::string_view stage) {
  if (stage == "hc_attn_mix" || stage == "hc_ffn_mix" || stage == "output_mix") return 2;
  if (stage == "hc_attn_combine" || stage == "hc_ffn_combine") return 5;
  for (size_t i = 0; i < kKinds.size(); ++i)
    if (kKinds[i] == stage) return i;
  return kKinds.size() - 1;
}

// Records an event after each stage; the time between two events is the later stage's.
class ProfileObserver final : public StageObserver {
 public:
  ProfileObserver(cudaStream_t stream, const int64_t& launches) : stream_(stream), launches_(launches) {}
  ProfileObserver(const ProfileObserver&) = delete;
  ProfileObserver& operator=(const ProfileObserver&) = delete;
  ~ProfileObserver() override {
    for (const Mark& m : marks_) cudaEventDestroy(m.event);
  }
  bool wants_values() const override { return false; }

  Status start() { return mark(kKinds.size()); }
  Status stage(std::string_view name, int, const float*, int64_t, int) override { return mark(kind_of(name)); }

  Result<std::vector<StageTime>> times() const {
    DECODER_CUDA_TRY(cudaStreamSynchronize(stream_));
    std::vector<StageTime> out;
    for (std::string_view k : kKinds) out.push_back(StageTime{std::string(k), 0.0, 0});
    for (size_t i = 1; i < marks_.size(); ++i) {
      float ms = 0.0f;
      DECODER_CUDA_TRY(cudaEventElapsedTime(&ms, marks_[i - 1].event, marks_[i].event));
      StageTime& t = out[marks_[i].kind];
      t.ms += ms;
      t.launches += static_cast<int>(marks_[i].launches - marks_[i - 1].launches);
    }
    return out;
  }

 private:
  struct Mark {
    cudaEvent_t event;
    size_t kind;
    int64_t launches;
  };
  Status mark(size_t kind) {
    cudaEvent_t e = nullptr;
    DECODER_CUDA_TRY(cudaEventCreate(&e));
    marks_.push_back({e, kind, launches_});
    DECODER_CUDA_TRY(cudaEventRecord(e, stream_));
    return Status::ok_status();
  }
  cudaStream_t stream_;
  const int64_t& launches_;
  std::vector<Mark> marks_;
};

}  // namespace

Decoder::Impl::~Impl() {
  if (stream) {
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
  if (copy_stream) {
    cudaStreamSynchronize(copy_stream);
    cudaStreamDestroy(copy_stream);
  }
  if (rows_copied) cudaEventDestroy(rows_copied);
  if (side_stream) {
    cudaStreamSynchronize(side_stream);
    cudaStreamDestroy(side_stream);
  }
  if (side_fork) cudaEventDestroy(side_fork);
  if (side_join) cudaEventDestroy(side_join);
}

Result<std::unique_ptr<Decoder>> Decoder::create(const model::ModelConfig& config, const model::Weights& weights,
                                                 const DecoderOptions& options, const WeightFill& fill) {
  STRATA_TRY(check_switches());  // a refused STRATA_* value names itself before anything is allocated
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->options = options;
  impl->fill = fill;
  STRATA_TRY(impl->check_config());
  if (config.has_ple) {
    const model::Tensor& table = weights.per_layer_token_embd;
    if (!table) return Status::error("cuda decoder: per_layer_token_embd.weight (the n-gram table) is missing");
    if (!get_rows_supports(table.type))
      return Status::error("cuda decoder: per_layer_token_embd.weight has type " +
                           std::string(quant::type_info(table.type)->name) + ", which the CUDA get_rows kernel does not take");
    if (table.cols() != config.ple.row_dim)
      return Status::error("cuda decoder: per_layer_token_embd.weight rows have " + std::to_string(table.cols()) +
                           " values, expected ple row_dim " + std::to_string(config.ple.row_dim));
    impl->ple_table = &table;
  }
  STRATA_TRY(check_device(options.device));
  DECODER_CUDA_TRY(cudaSetDevice(options.device));
  DECODER_CUDA_TRY(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking));
  if (switches().side_stream) {  // STRATA_SIDE_STREAM=0: the other arm of a benchmark
    DECODER_CUDA_TRY(cudaStreamCreateWithFlags(&impl->side_stream, cudaStreamNonBlocking));
    DECODER_CUDA_TRY(cudaEventCreateWithFlags(&impl->side_fork, cudaEventDisableTiming));
    DECODER_CUDA_TRY(cudaEventCreateWithFlags(&impl->side_join, cudaEventDisableTiming));
  }
  if (config.has_ple) {
    DECODER_CUDA_TRY(cudaStreamCreateWithFlags(&impl->copy_stream, cudaStreamNonBlocking));
    DECODER_CUDA_TRY(cudaEventCreateWithFlags(&impl->rows_copied, cudaEventDisableTiming));
  }
  STRATA_TRY(impl->upload(weights, fill));
  STRATA_TRY(impl->allocate_state_and_scratch());
  return std::unique_ptr<Decoder>(new Decoder(std::move(impl)));
}

Decoder::Decoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Decoder::~Decoder() = default;

Status Decoder::reset() {
  DECODER_CUDA_TRY(cudaSetDevice(impl_->options.device));
  return impl_->zero_state();
}

int64_t Decoder::n_past() const { return impl_->pos; }

namespace {

Status check_window(const Decoder::Impl& m, std::span<const int32_t> tokens) {
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (m.pending_rows != 0) return Status::error("cuda decoder: forward: commit() the previous window first");
  if (T < 1 || T > m.options.max_window)
    return Status::error("cuda decoder: forward: " + std::to_string(T) + " tokens, expected 1 .. " +
                         std::to_string(m.options.max_window) + " (max_window)");
  for (int32_t id : tokens)
    if (id < 0 || static_cast<uint32_t>(id) >= m.config.n_vocab)
      return Status::error("cuda decoder: forward: token id " + std::to_string(id) + " out of range (expected 0 <= id < " +
                           std::to_string(m.config.n_vocab) + ")");
  if (m.pos + T > m.options.max_ctx)
    return Status::error("cuda decoder: context full: " + std::to_string(m.pos) + " + " + std::to_string(T) + " > " +
                         std::to_string(m.options.max_ctx));
  return Status::ok_status();
}

// What every window does first: the checks, the device, the n-gram rows (hashed and checked on
// the host) and the token ids staged; the rows' own staging depends on how the window runs.
Result<std::vector<uint64_t>> begin_window(Decoder::Impl& m, std::span<const int32_t> tokens) {
  STRATA_TRY(check_window(m, tokens));
  DECODER_CUDA_TRY(cudaSetDevice(m.options.device));
  auto rows = m.ngram_rows(tokens);
  if (!rows) return rows.status();
  STRATA_TRY(m.stage_tokens(tokens));
  return rows;
}

}  // namespace

// Token ids and the position in one copy.
Status Decoder::Impl::stage_tokens(std::span<const int32_t> tokens) {
  auto* in = reinterpret_cast<WindowInputs*>(pinned_inputs.get());
  in->pos = pos;
  std::copy(tokens.begin(), tokens.end(), in->tokens);
  DECODER_CUDA_TRY(cudaMemcpyAsync(s.in, in, sizeof(WindowInputs), cudaMemcpyHostToDevice, stream));
  pdl_full_dependency_next(stream);  // the window's first kernel reads it (launch.h)
  return Status::ok_status();
}

// The n-gram table rows of the window, row t * n_heads + h for head h of token t: the
// reference's context and hash on the host, each checked against the table.
Result<std::vector<uint64_t>> Decoder::Impl::ngram_rows(std::span<const int32_t> tokens) const {
  std::vector<uint64_t> out;
  if (!config.has_ple) return out;
  const model::PleConfig& ple = config.ple;
  std::vector<int32_t> context = ple_context;  // advanced for real by commit()
  const std::vector<int64_t> ctx = reference::ple_contexts(ple, context, tokens);
  const int64_t table_rows = ple_table->rows();
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::vector<uint64_t> rows = reference::ple_rows(ple, ctx.data() + t * ple.ngram_size);
    for (uint32_t h = 0; h < ple.n_heads; ++h) {
      if (rows[h] >= static_cast<uint64_t>(table_rows))
        return Status::error("cuda decoder: n-gram row " + std::to_string(rows[h]) + " past the table's " +
                             std::to_string(table_rows) + " rows");
      out.push_back(rows[h]);
    }
  }
  return out;
}

// Gathers the rows into the pinned staging (from the host table, or its fill) and copies them on
// `on` to the device rows the PLE block reads.
Status Decoder::Impl::stage_ngram_rows(const std::vector<uint64_t>& rows, cudaStream_t on) {
  if (rows.empty()) return Status::ok_status();
  for (size_t i = 0; i < rows.size(); ++i) {
    uint8_t* dst = pinned_rows.get() + static_cast<int64_t>(i) * ple_row_bytes;
    if (fill) {
      STRATA_TRY(fill(*ple_table, rows[i] * static_cast<uint64_t>(ple_row_bytes), static_cast<uint64_t>(ple_row_bytes), dst));
    } else {
      std::memcpy(dst, ple_table->row(static_cast<int64_t>(rows[i])), static_cast<size_t>(ple_row_bytes));
    }
  }
  DECODER_CUDA_TRY(cudaMemcpyAsync(s.ple_rows, pinned_rows.get(), rows.size() * static_cast<size_t>(ple_row_bytes),
                                   cudaMemcpyHostToDevice, on));
  pdl_full_dependency_next(on);
  return Status::ok_status();
}

// The window's graph of `part` for T rows (captured on first use), launched on the stream.
Status Decoder::Impl::launch_window_graph(int T, WindowPart part) {
  const auto key = std::make_tuple(T, part, state_side);
  auto& g = window_graphs[key];
  if (!g) {
    auto captured = Graph::capture(stream, [&] { return run_window(T, nullptr, part); });
    if (!captured) {
      window_graphs.erase(key);
      return captured.status();
    }
    g = std::move(*captured);
  }
  return g->launch(stream);
}

Result<WindowOutput> Decoder::forward(std::span<const int32_t> tokens, const WindowRequest& request) {
  Impl& m = *impl_;
  auto rows = begin_window(m, tokens);
  if (!rows) return rows.status();
  const int T = static_cast<int>(tokens.size());
  if (request.sink && *request.sink) {
    STRATA_TRY(m.stage_ngram_rows(*rows, m.stream));
    SinkObserver obs(m.stream, m.pos, *request.sink);
    STRATA_TRY(m.run_window(T, &obs));
  } else if (m.options.graphs && m.config.has_ple) {
    // The n-gram rows' hand-off overlaps the window: the blocks before the first PLE block run
    // while the host hashes and gathers the rows, their copy goes on its own stream, and only
    // the rest of the window waits for it.
    STRATA_TRY(m.launch_window_graph(T, WindowPart::BeforePle));
    if (const Status st = m.stage_ngram_rows(*rows, m.copy_stream); !st.ok())
      return Status::error(st.message() + " (the window's first blocks have run: reset() the decoder)");
    DECODER_CUDA_TRY(cudaEventRecord(m.rows_copied, m.copy_stream));
    DECODER_CUDA_TRY(cudaStreamWaitEvent(m.stream, m.rows_copied, 0));
    pdl_full_dependency_next(m.stream);
    STRATA_TRY(m.launch_window_graph(T, WindowPart::FromPle));
  } else if (m.options.graphs) {
    STRATA_TRY(m.launch_window_graph(T, WindowPart::All));
  } else {
    STRATA_TRY(m.stage_ngram_rows(*rows, m.stream));
    STRATA_TRY(m.run_window(T, nullptr));
  }

  WindowOutput out;
  out.n_rows = T;
  DECODER_CUDA_TRY(cudaMemcpyAsync(m.pinned_argmax.get(), m.s.argmax, sizeof(int32_t) * T, cudaMemcpyDeviceToHost, m.stream));
  if (request.logits) {
    out.logits.resize(static_cast<size_t>(T) * m.config.n_vocab);
    DECODER_CUDA_TRY(cudaMemcpyAsync(out.logits.data(), m.s.logits, out.logits.size() * sizeof(float),
                                     cudaMemcpyDeviceToHost, m.stream));
  }
  if (request.wide) {  // the final mixer only reads x: after the window it is the pre-mixer residual
    out.wide.resize(static_cast<size_t>(T) * m.config.n_wide());
    DECODER_CUDA_TRY(cudaMemcpyAsync(out.wide.data(), m.s.x, out.wide.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                     m.stream));
  }
  DECODER_CUDA_TRY(cudaStreamSynchronize(m.stream));
  const auto* am = reinterpret_cast<const int32_t*>(m.pinned_argmax.get());
  out.argmax.assign(am, am + T);
  m.pending_rows = T;
  m.pending_tokens.assign(tokens.begin(), tokens.end());
  return out;
}

Status Decoder::commit(int n) {
  Impl& m = *impl_;
  const int T = m.pending_rows;
  if (T == 0) return Status::error("cuda decoder: commit: no window to commit (call forward() first)");
  if (n < 1 || n > T)
    return Status::error("cuda decoder: commit: " + std::to_string(n) + " rows, expected 1 .. " + std::to_string(T));
  DECODER_CUDA_TRY(cudaSetDevice(m.options.device));
  if (m.options.graphs) {
    const auto key = std::make_tuple(T, n, m.state_side);
    auto& g = m.commit_graphs[key];
    if (!g) {
      auto captured = Graph::capture(m.stream, [&] { return m.run_commit(T, n); });
      if (!captured) {
        m.commit_graphs.erase(key);
        return captured.status();
      }
      g = std::move(*captured);
    }
    STRATA_TRY(g->launch(m.stream));
  } else {
    STRATA_TRY(m.run_commit(T, n));
  }
  m.pos += n;
  if (T > 1 && n == T) m.state_side ^= 1;  // the window's state is the committed one
  if (m.config.has_ple)
    reference::ple_contexts(m.config.ple, m.ple_context, std::span<const int32_t>(m.pending_tokens).first(n));
  m.pending_rows = 0;
  m.pending_tokens.clear();
  return Status::ok_status();
}

Result<std::vector<StageTime>> Decoder::profile(std::span<const int32_t> tokens) {
  Impl& m = *impl_;
  auto rows = begin_window(m, tokens);
  if (!rows) return rows.status();
  const int T = static_cast<int>(tokens.size());
  STRATA_TRY(m.stage_ngram_rows(*rows, m.stream));
  ProfileObserver obs(m.stream, m.launches);
  STRATA_TRY(obs.start());
  STRATA_TRY(m.run_window(T, &obs));
  auto times = obs.times();
  if (!times) return times.status();
  m.pending_rows = T;
  m.pending_tokens.assign(tokens.begin(), tokens.end());
  return times;
}

DecoderStats Decoder::stats() const {
  const Impl& m = *impl_;
  DecoderStats st;
  st.weight_bytes = m.weight_arena.bytes();
  st.state_bytes = m.state_memory.bytes() + m.scratch_memory.bytes();
  int64_t nodes[2] = {0, 0};  // of the T = 1 window, over its parts, on each side of the GDN states
  for (const auto& [key, g] : m.window_graphs)
    if (std::get<0>(key) == 1 && g) nodes[std::get<2>(key)] += g->nodes();
  st.graph_nodes = std::max(nodes[0], nodes[1]);
  st.upload_ms = m.upload_ms;
  return st;
}

}  // namespace strata::cuda

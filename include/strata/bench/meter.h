// The StageMeter rides on the reference forward's stage sink (reference/stage.h): the forward
// calls it after every stage, so the time since the previous call is that stage's time, and
// the stage's name and block say which bound weights it just read. Bytes are counted from
// what the forward did, not from the file size:
//   - dense weights of the stage's block (every byte of every matrix and vector it uses);
//   - routed experts: the router stage hands over its logits, the meter routes them with the
//     forward's own route() and counts the gate/up/down rows of the union of the chosen
//     experts (a window reads each expert once, as moe_layer does);
//   - embedding rows of the distinct tokens, the n-gram table rows the PLE hashes select;
//   - the KV cache rows attention reads (every visible token while QSA is dense, else the
//     selected blocks and tail) and the recurrent GDN / PLE-conv state.
// Weights are counted at the size they are read: quantized blocks for matrices, the fp32
// copy for the small vectors the forward reads as fp32. Activations are not counted.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "strata/reference/model.h"
#include "strata/reference/stage.h"
#include "strata/reference/state.h"

namespace strata::bench {

// Bytes read, by kind. All weights but experts are "dense".
struct ByteCounts {
  uint64_t dense = 0;        // every non-routed weight the stages read
  uint64_t experts = 0;      // routed experts' gate/up/down rows
  uint64_t embed = 0;        // token_embd rows
  uint64_t ngram = 0;        // PLE n-gram table rows
  uint64_t kv = 0;           // attention K/V (and QSA block keys) read
  uint64_t state = 0;        // GDN conv + recurrent matrices, PLE conv history
  uint64_t total() const { return dense + experts + embed + ngram + kv + state; }
  ByteCounts& operator+=(const ByteCounts& o);
};

struct StageTime {
  double seconds = 0.0;
  int64_t calls = 0;
};
using StageTimes = std::map<std::string, StageTime, std::less<>>;

enum class Phase { Prefill, Decode, Commit };

// The K/V cache tokens and block keys one attention block reads for the rows at
// n_after - n_rows .. n_after - 1, the cache then holding n_after tokens: every visible token
// while QSA is dense (or the block has no indexer), else the selected blocks and the tail.
uint64_t attention_read_bytes(const model::ModelConfig& config, const model::BlockPlan& plan, bool has_indexer,
                              int64_t n_after, int64_t n_rows);

class StageMeter {
 public:
  explicit StageMeter(const reference::Model& model);
  StageMeter(const StageMeter&) = delete;             // the sink captures `this`
  StageMeter& operator=(const StageMeter&) = delete;

  // Brackets one forward call. count_bytes: attribute read bytes (decode and commit only;
  // prefill is timed, not counted). The state must be the one the forward advances.
  void begin(Phase phase, const reference::SequenceState& state, bool count_bytes);
  void end();  // the time after the last stage goes to "other"
  // Time spent outside a forward that belongs to a phase (the commit's state snapshot).
  void add_time(Phase phase, std::string_view stage, double seconds);

  const reference::StageSink* sink() const { return &sink_; }
  const StageTimes& times(Phase phase) const { return times_[static_cast<int>(phase)]; }
  const ByteCounts& bytes() const { return bytes_; }
  // Routed experts read, summed over (forward call, block): divide by calls x blocks for the
  // mean distinct experts per block per window.
  uint64_t expert_groups() const { return expert_groups_; }
  uint64_t router_calls() const { return router_calls_; }
  // Seconds spent inside the sink itself (counting, routing copies): part of the wall time
  // the bench reports, shown separately so it can be judged.
  double overhead_s() const { return overhead_s_; }

  // The fixed-size part (no KV, no state) of one stage's dense weights; public for tests.
  uint64_t dense_stage_bytes(std::string_view stage, int block) const;

 private:
  void on_stage(std::string_view stage, int block, int64_t pos0, int64_t n_rows, std::span<const float> rows);
  void count(std::string_view stage, int block, int64_t n_rows, std::span<const float> rows);
  uint64_t expert_bytes(int block, std::span<const float> logits, int64_t n_rows);
  uint64_t kv_bytes(int block, int64_t n_rows) const;

  using Clock = std::chrono::steady_clock;
  const reference::Model& model_;
  const reference::SequenceState* state_ = nullptr;
  reference::StageSink sink_;
  Phase phase_ = Phase::Prefill;
  bool counting_ = false;
  Clock::time_point last_;
  StageTimes times_[3];
  ByteCounts bytes_;
  uint64_t expert_groups_ = 0, router_calls_ = 0;
  double overhead_s_ = 0.0;
};

}  // namespace strata::bench

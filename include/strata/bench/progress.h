// Progress on long work (synthesis, loading, prefill, decode): one self-overwriting line on
// stderr, only when stderr is a terminal, so logs and CI output stay clean.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata::bench {

class Progress {
 public:
  explicit Progress(bool enabled);   // see stderr_is_tty()
  ~Progress();

  // Starts a step without a count ("label ...").
  void start(std::string_view label);
  // "label  done/total unit  12.3 s", redrawn at most 10 times a second (and at done == total).
  void update(std::string_view label, double done, double total, std::string_view unit = "");
  // Ends the current line with the step's time ("label  done in 12.3 s").
  void finish(std::string_view label);
  // A one-off line (always printed when enabled).
  void note(std::string_view text);
  bool enabled() const { return enabled_; }

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_;
  bool open_line_ = false;
  std::string label_;
  Clock::time_point started_, drawn_;
};

bool stderr_is_tty();

}  // namespace strata::bench

#include "strata/bench/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace strata::bench {

namespace {

double secs(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

bool stderr_is_tty() { return isatty(STDERR_FILENO) == 1; }

Progress::Progress(bool enabled) : enabled_(enabled) {}

Progress::~Progress() {
  if (enabled_ && open_line_) fmt::print(stderr, "\n");
}

void Progress::start(std::string_view label) {
  if (!enabled_) return;
  if (open_line_) fmt::print(stderr, "\n");
  label_ = std::string(label);
  started_ = drawn_ = Clock::now();
  open_line_ = true;
  fmt::print(stderr, "\r\x1b[Kstrata bench: {} ...", label);
  std::fflush(stderr);
}

void Progress::update(std::string_view label, double done, double total, std::string_view unit) {
  if (!enabled_) return;
  const auto now = Clock::now();
  if (!open_line_ || label != label_) {
    if (open_line_) fmt::print(stderr, "\n");
    label_ = std::string(label);
    started_ = now;
    open_line_ = true;
  } else if (secs(now - drawn_) < 0.1 && done < total) {
    return;  // redrawing faster than the eye reads costs time in the loop being measured
  }
  drawn_ = now;
  const double pct = total > 0 ? 100.0 * done / total : 0.0;
  fmt::print(stderr, "\r\x1b[Kstrata bench: {}  {:.0f}/{:.0f}{}{}  {:5.1f}%  {:.1f} s", label, done, total,
             unit.empty() ? "" : " ", unit, pct, secs(now - started_));
  std::fflush(stderr);
}

void Progress::finish(std::string_view label) {
  if (!enabled_) return;
  const double s = open_line_ && label == label_ ? secs(Clock::now() - started_) : 0.0;
  fmt::print(stderr, "\r\x1b[Kstrata bench: {}  done in {:.1f} s\n", label, s);
  open_line_ = false;
  label_.clear();
}

void Progress::note(std::string_view text) {
  if (!enabled_) return;
  if (open_line_) fmt::print(stderr, "\n");
  open_line_ = false;
  label_.clear();
  fmt::print(stderr, "strata bench: {}\n", text);
}

}  // namespace strata::bench

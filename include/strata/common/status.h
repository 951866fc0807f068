// Errors as values at the edges (STYLE habit 12). Loaders, parsers and the CLI return
// Status or Result<T>; only main() decides to exit. Messages read
// "<component>: <what failed>: <detail> (expected X, got Y)".
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace strata {

class Status {
 public:
  Status() = default;
  static Status ok_status() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message), true); }

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return message_; }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
};

// A value or an error message. Accessing value() of a failed Result is a bug (asserted).
template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) { assert(!status_.ok()); }  // NOLINT

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Status& status() const { return status_; }
  const std::string& error() const { return status_.message(); }

  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

inline const Status& status_of(const Status& s) { return s; }
template <class T>
const Status& status_of(const Result<T>& r) { return r.status(); }

}  // namespace strata

// Return the failed Status of a Status/Result expression from the current function.
#define STRATA_TRY(expr)                                      \
  do {                                                        \
    const auto& strata_try_ = (expr);                         \
    if (!strata_try_.ok()) return ::strata::status_of(strata_try_); \
  } while (0)

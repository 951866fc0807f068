// A small fixed pool of worker threads for the reference path's data-parallel loops
// (matmul rows, GDN heads, attention heads). It only splits index ranges: every index is
// computed by exactly the same code whatever the thread count, so results never depend on
// how many threads run (a requirement for prefill == decode bit parity).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace strata::reference {

class ThreadPool {
 public:
  // n_threads <= 0 picks std::thread::hardware_concurrency(). The calling thread counts as
  // one of them, so ThreadPool(1) runs everything inline.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint contiguous ranges covering [0, n), in parallel, and
  // returns when all are done. Ranges are at least min_chunk long (except the last).
  // Not reentrant: fn must not call parallel_for on the same pool.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk = 1);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunk_ = 1;
  int64_t next_ = 0;          // next unclaimed index
  uint64_t generation_ = 0;   // bumped per job so sleeping workers see a new one
  int active_ = 0;            // workers still inside the current job
  bool stop_ = false;
};

}  // namespace strata::reference

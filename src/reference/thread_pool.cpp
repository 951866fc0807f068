// Work is handed out in chunks from a shared counter, so a slow thread (the machine is
// shared) does not hold the whole loop back.
#include "strata/reference/thread_pool.h"

#include <algorithm>

namespace strata::reference {

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk) {
  if (n <= 0) return;
  const int64_t threads = size();
  // About 4 chunks per thread balances load without much counter traffic.
  const int64_t chunk = std::max<int64_t>(std::max<int64_t>(min_chunk, 1), (n + threads * 4 - 1) / (threads * 4));
  if (workers_.empty() || n <= chunk) {
    fn(0, n);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  next_ = 0;
  active_ = static_cast<int>(workers_.size());
  ++generation_;
  lock.unlock();
  start_cv_.notify_all();
  // The caller works too.
  for (;;) {
    lock.lock();
    const int64_t begin = next_;
    next_ = std::min(job_n_, next_ + job_chunk_);
    lock.unlock();
    if (begin >= job_n_) break;
    fn(begin, std::min(job_n_, begin + job_chunk_));
  }
  lock.lock();
  done_cv_.wait(lock, [this] { return active_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int /*index*/) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    const auto* fn = job_;
    for (;;) {
      const int64_t begin = next_;
      next_ = std::min(job_n_, next_ + job_chunk_);
      if (begin >= job_n_) break;
      const int64_t end = std::min(job_n_, begin + job_chunk_);
      lock.unlock();
      (*fn)(begin, end);
      lock.lock();
    }
    if (--active_ == 0) done_cv_.notify_all();
  }
}

}  // namespace strata::reference

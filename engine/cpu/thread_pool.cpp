#include "cpu/thread_pool.hpp"

#include <algorithm>
#include <exception>
#include <string>

#include "attnres/engine.hpp"
#include "attnres/error.hpp"

namespace attnres::engine {

ThreadPool::ThreadPool(int threads, const StartThread& start) : threads_(std::max(1, threads)) {
  if (threads_ > kMaxThreads) {
    throw Error("cannot start " + std::to_string(threads_) + " threads: at most " +
                std::to_string(kMaxThreads) + " (kMaxThreads)");
  }
  std::string failure;
  try {
    workers_.reserve(static_cast<std::size_t>(threads_ - 1));
    for (int k = 1; k < threads_; ++k) {
      std::function<void()> body = [this, k] { worker_loop(k); };
      workers_.push_back(start ? start(k, std::move(body)) : std::thread(std::move(body)));
    }
  } catch (const std::exception& error) {
    failure = error.what();
  } catch (...) {
    failure = "unknown error";
  }
  if (!failure.empty()) {
    // The destructor does not run for a constructor that throws: stop and join by hand, so that
    // no started worker outlives the mutex and condition variables it waits on.
    const std::size_t started = workers_.size() + 1;  // the caller's thread is one of them
    stop_and_join();
    throw Error("could start only " + std::to_string(started) + " of " + std::to_string(threads_) +
                " threads (" + failure + "); use fewer threads (--threads)");
  }
}

ThreadPool::~ThreadPool() {
  stop_and_join();
}

void ThreadPool::stop_and_join() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
  workers_.clear();
}

std::pair<std::size_t, std::size_t> ThreadPool::chunk(std::size_t count, int parts, int k) {
  const auto p = static_cast<std::size_t>(parts), i = static_cast<std::size_t>(k);
  return {count * i / p, count * (i + 1) / p};
}

void ThreadPool::run(std::size_t count, const void* callable, Invoke invoke) {
  if (count == 0) return;
  const int parts =
      static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(threads_), count));
  if (parts == 1) {
    invoke(callable, 0, count, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    callable_ = callable;
    invoke_ = invoke;
    count_ = count;
    parts_ = parts;
    pending_ = parts - 1;
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  std::exception_ptr mine;
  try {
    const auto [begin, end] = chunk(count, parts, 0);
    invoke(callable, begin, end, 0);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  callable_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::worker_loop(int index) {
  std::size_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= parts_) continue;  // fewer chunks than workers this time
    const void* callable = callable_;
    const Invoke invoke = invoke_;
    const std::size_t count = count_;
    const int parts = parts_;
    lock.unlock();
    try {
      const auto [begin, end] = chunk(count, parts, index);
      invoke(callable, begin, end, index);
    } catch (...) {
      std::lock_guard<std::mutex> guard(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    lock.lock();
    if (--pending_ == 0) done_.notify_all();
  }
}

}  // namespace attnres::engine

// A fixed pool of worker threads for the fast CPU engine. Work is split into as many contiguous
// chunks as there are threads, always the same way for the same (count, threads), so results are
// deterministic for a given thread count.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace attnres::engine {

class ThreadPool {
 public:
  // Starts the thread of worker `index` (1..threads-1) running `body`. The default is
  // std::thread; tests pass one that fails to check that a failed start is cleaned up.
  using StartThread = std::function<std::thread(int index, std::function<void()> body)>;

  // threads >= 1 (at most kMaxThreads, engine.hpp); the caller's thread is one of them. When a
  // thread cannot be started (std::thread throws: the process is out of threads or memory), the
  // workers already started are stopped and joined and attnres::Error says how many started.
  explicit ThreadPool(int threads, const StartThread& start = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return threads_; }

  // Calls work(begin, end, worker) on [0, count) split into min(threads, count) contiguous chunks,
  // chunk k on worker k (worker 0 = the calling thread), and waits for all of them. The first
  // exception thrown by a chunk is rethrown here. `work` is passed by reference, never copied
  // into a std::function: no allocation per call.
  template <typename Work>
  void parallel_for(std::size_t count, Work&& work) {
    run(count, &work, [](const void* callable, std::size_t begin, std::size_t end, int worker) {
      (*static_cast<std::remove_reference_t<Work>*>(const_cast<void*>(callable)))(begin, end,
                                                                                  worker);
    });
  }

  // The chunk [begin, end) of worker k when [0, count) is split over `parts` workers.
  static std::pair<std::size_t, std::size_t> chunk(std::size_t count, int parts, int k);

 private:
  using Invoke = void (*)(const void*, std::size_t, std::size_t, int);
  void run(std::size_t count, const void* callable, Invoke invoke);
  void worker_loop(int index);
  void stop_and_join();

  int threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const void* callable_ = nullptr;
  Invoke invoke_ = nullptr;
  std::size_t count_ = 0;
  int parts_ = 0;
  std::size_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace attnres::engine

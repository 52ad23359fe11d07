// The fast engines' thread pool: a thread that cannot be started is an error, never a hang, and
// the thread count has one documented bound (kMaxThreads).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <system_error>

#include "attnres/engine.hpp"
#include "attnres/error.hpp"
#include "cpu/thread_pool.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_thread_pool {

// Runs `body` on a separate thread and fails the test (instead of hanging the suite) when it
// does not finish within 20 seconds.
template <typename Body>
void finishes_in_time(Body body) {
  auto done = std::async(std::launch::async, body);
  ASSERT_EQ(done.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "the thread pool hangs";
  done.get();
}

TEST(ThreadPool, AFailedThreadStartThrowsAndJoinsTheStartedWorkers) {
  finishes_in_time([] {
    std::atomic<int> started{0};
    const engine::ThreadPool::StartThread start = [&](int index, std::function<void()> body) {
      if (index == 5)
        throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                                "cannot create thread");
      ++started;
      return std::thread(std::move(body));
    };
    try {
      engine::ThreadPool pool(8, start);
      ADD_FAILURE() << "a pool whose sixth thread cannot start was built";
    } catch (const Error& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("could start only 5 of 8 threads"), std::string::npos) << message;
      EXPECT_NE(message.find("--threads"), std::string::npos) << message;
    }
    EXPECT_EQ(started.load(), 4);
  });
}

TEST(ThreadPool, AFailedFirstThreadStartThrows) {
  finishes_in_time([] {
    const engine::ThreadPool::StartThread start = [](int, std::function<void()>) -> std::thread {
      throw std::bad_alloc();
    };
    EXPECT_THROW(engine::ThreadPool(2, start), Error);
  });
}

TEST(ThreadPool, AStartedPoolStillRunsWork) {
  finishes_in_time([] {
    engine::ThreadPool pool(
        4, [](int, std::function<void()> body) { return std::thread(std::move(body)); });
    std::atomic<std::size_t> sum{0};
    pool.parallel_for(100, [&](std::size_t begin, std::size_t end, int) {
      for (std::size_t i = begin; i < end; ++i) sum += i;
    });
    EXPECT_EQ(sum.load(), 4950u);
  });
}

TEST(ThreadPool, RefusesMoreThanTheBound) {
  EXPECT_THROW(engine::ThreadPool(kMaxThreads + 1), Error);
}

TEST(ThreadCount, TheBoundIsCheckedWithTheNameOfTheSetting) {
  EXPECT_NO_THROW(check_thread_count(0, "--threads"));
  EXPECT_NO_THROW(check_thread_count(kMaxThreads, "--threads"));
  EXPECT_THROW(check_thread_count(-1, "--threads"), Error);
  try {
    check_thread_count(5000, "--threads");
    ADD_FAILURE() << "5000 threads accepted";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("--threads"), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(kMaxThreads)), std::string::npos) << message;
    EXPECT_NE(message.find("5000"), std::string::npos) << message;
  }
  EXPECT_LE(default_thread_count(), kMaxThreads);
}

}  // namespace test_thread_pool
}  // namespace attnres

#include "coordinator/work_pool.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <future>

namespace headlab::coord {

TEST_CASE("the pool runs jobs on its threads and refuses beyond its queue") {
  WorkPool pool(2, 3);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> started{0}, done{0};
  auto blocker = [&] {
    ++started;
    gate.wait();
    ++done;
  };
  CHECK(pool.TryPost(blocker));
  CHECK(pool.TryPost(blocker));
  while (started < 2) std::this_thread::yield();  // both threads are held
  CHECK(pool.TryPost(blocker));
  CHECK(pool.TryPost(blocker));
  CHECK(pool.TryPost(blocker));
  CHECK(pool.queued() == 3);
  CHECK_FALSE(pool.TryPost(blocker));  // the queue is full
  release.set_value();
  while (done < 5) std::this_thread::yield();
  CHECK(pool.queued() == 0);
  CHECK(pool.TryPost([&] { ++done; }));
  pool.Stop();
  CHECK_FALSE(pool.TryPost([&] { ++done; }));
}

TEST_CASE("Stop drops queued jobs unrun and waits for running ones") {
  auto pool = std::make_unique<WorkPool>(1, 10);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<bool> started{false};
  std::atomic<int> ran{0};
  auto token = std::make_shared<int>(0);
  pool->TryPost([&] {
    started = true;
    gate.wait();
    ++ran;
  });
  while (!started) std::this_thread::yield();
  pool->TryPost([&, token] { ++ran; });
  CHECK(token.use_count() == 2);
  std::thread stopper([&] { pool->Stop(); });
  while (pool->queued() != 0) std::this_thread::yield();  // Stop has taken the queue
  release.set_value();
  stopper.join();
  CHECK(ran == 1);
  CHECK(token.use_count() == 1);  // the queued job was destroyed unrun
}

}  // namespace headlab::coord

// The core ledger: grants never add up to more than the cores, reservations are honoured, waiting
// requests are served in order, and many threads taking and giving back cores all finish.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "common/error.h"
#include "serve/core_pool.h"

namespace stagecraft::serve {
namespace {

TEST(CorePool, GrantOfZeroOrTooManyIsTheWholePart) {
  CorePool pool(4);
  EXPECT_EQ(pool.cores(), 4);
  {
    CorePool::Grant all = pool.acquire(0);
    EXPECT_EQ(all.cores(), 4);
    EXPECT_EQ(pool.shared_in_use(), 4);
    EXPECT_FALSE(pool.try_acquire(1).has_value());  // nothing left
  }
  EXPECT_EQ(pool.shared_in_use(), 0);
  CorePool::Grant many = pool.acquire(9);
  EXPECT_EQ(many.cores(), 4);
}

TEST(CorePool, GrantsShareThePoolUpToItsSize) {
  CorePool pool(4);
  CorePool::Grant a = pool.acquire(1);
  std::optional<CorePool::Grant> b = pool.try_acquire(3);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(pool.shared_in_use(), 4);
  EXPECT_FALSE(pool.try_acquire(1).has_value());
  a.release();
  EXPECT_EQ(a.cores(), 0);
  EXPECT_EQ(pool.shared_in_use(), 3);
  EXPECT_TRUE(pool.try_acquire(1).has_value());
}

TEST(CorePool, ReservedCoresAreTakenOutOfTheSharedPart) {
  CorePool pool(4);
  auto reserved = pool.reserve("model 'fast'", 1);
  EXPECT_EQ(reserved->cores(), 1);
  EXPECT_EQ(pool.shared_cores(), 3);
  CorePool::Grant shared = pool.acquire(0);  // everything shared: 3, not 4
  EXPECT_EQ(shared.cores(), 3);
  // The reserved core is free although the shared part is full.
  std::optional<CorePool::Grant> fast = pool.try_acquire(0, reserved.get());
  ASSERT_TRUE(fast.has_value());
  EXPECT_EQ(fast->cores(), 1);
  EXPECT_FALSE(pool.try_acquire(0, reserved.get()).has_value());  // one at a time
  fast.reset();
  shared.release();
  reserved.reset();  // the core goes back
  EXPECT_EQ(pool.shared_cores(), 4);
}

TEST(CorePool, ReservingEverySharedCoreIsAnError) {
  CorePool pool(2);
  try {
    pool.reserve("model 'a'", 2);
    FAIL() << "reserved every core";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("at least one must stay shared"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(pool.reserve("model 'b'", 0), UsageError);
  auto one = pool.reserve("model 'c'", 1);
  EXPECT_THROW(pool.reserve("model 'd'", 1), UsageError);  // would leave none shared
  EXPECT_EQ(pool.shared_cores(), 1);
}

TEST(CorePool, AnOwnerReservingAgainSharesItsReservation) {
  CorePool pool(2);
  auto first = pool.reserve("model 'm'", 1);
  auto again = pool.reserve("model 'm'", 1);  // a reload while the first load still serves
  EXPECT_EQ(first.get(), again.get());
  EXPECT_EQ(pool.shared_cores(), 1);
  EXPECT_THROW(pool.reserve("model 'm'", 2), UsageError);
  first.reset();
  EXPECT_EQ(pool.shared_cores(), 1);  // still held by the reload
  again.reset();
  EXPECT_EQ(pool.shared_cores(), 2);
  auto later = pool.reserve("model 'm'", 1);  // a new reservation after both let go
  EXPECT_EQ(later->cores(), 1);
}

TEST(CorePool, WaitingRequestIsNotOvertaken) {
  CorePool pool(2);
  CorePool::Grant one = pool.acquire(1);
  auto big = std::async(std::launch::async, [&] { return pool.acquire(2).cores(); });
  while (pool.shared_waiting() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // One core is free, but a request for two waits first: a later small one must not jump it.
  EXPECT_FALSE(pool.try_acquire(1).has_value());
  one.release();
  EXPECT_EQ(big.get(), 2);
}

TEST(CorePool, ManyThreadsNeverHoldMoreThanTheCoresAndAllFinish) {
  constexpr int kCores = 3;
  constexpr int kThreads = 8;
  constexpr int kRounds = 300;
  CorePool pool(kCores);
  auto reserved = pool.reserve("model 'r'", 1);
  std::atomic<int> shared_held{0}, reserved_held{0}, worst_shared{0}, worst_reserved{0};
  std::vector<std::future<void>> done;
  for (int t = 0; t < kThreads; ++t) {
    done.push_back(std::async(std::launch::async, [&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < kRounds; ++i) {
        const bool from_reserved = rng() % 4 == 0;
        CorePool::Grant g =
            pool.acquire(static_cast<int>(rng() % 4), from_reserved ? reserved.get() : nullptr);
        auto& held = from_reserved ? reserved_held : shared_held;
        auto& worst = from_reserved ? worst_reserved : worst_shared;
        const int now = held += g.cores();
        int w = worst.load();
        while (now > w && !worst.compare_exchange_weak(w, now)) {
        }
        std::this_thread::yield();
        held -= g.cores();
      }
    }));
  }
  for (auto& f : done) {
    // A liveness bound, not a timing assertion: 2400 grants take milliseconds; a deadlock never
    // ends.
    ASSERT_EQ(f.wait_for(std::chrono::seconds(120)), std::future_status::ready) << "deadlock";
  }
  EXPECT_GE(worst_shared.load(), 1);
  EXPECT_LE(worst_shared.load(), kCores - 1);
  EXPECT_LE(worst_reserved.load(), 1);
  EXPECT_EQ(pool.shared_in_use(), 0);
}

}  // namespace
}  // namespace stagecraft::serve

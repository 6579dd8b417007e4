#include "serve/core_pool.h"

#include <sched.h>

#include <algorithm>
#include <cassert>
#include <thread>
#include <utility>

#include "common/error.h"
#include "common/strings.h"

namespace stagecraft::serve {

int CorePool::available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

CorePool::CorePool(int cores) : cores_(cores > 0 ? cores : available_cores()) {
  shared_.capacity = cores_;
}

CorePool::~CorePool() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return shared_.in_use == 0 && reservations_ == 0; });
}

int CorePool::shared_cores() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return shared_.capacity;
}

int CorePool::shared_in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return shared_.in_use;
}

int CorePool::shared_waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(shared_.next_ticket - shared_.serving);
}

CorePool::Part& CorePool::part_of(Reservation* from) {
  if (!from) return shared_;
  assert(&from->pool_ == this && "a reservation of another pool");
  return from->part_;
}

int CorePool::clamp(int cores, const Part& part) const {
  // Re-clamped while waiting: a reservation made meanwhile can shrink the shared part.
  return (cores <= 0 || cores > part.capacity) ? part.capacity : cores;
}

std::shared_ptr<CorePool::Reservation> CorePool::reserve(const std::string& owner, int cores) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (auto held = owners_[owner].lock()) {
    if (held->cores() != cores) {
      throw UsageError(cat(owner, ": cannot reserve ", cores,
                           " core(s): its previous load still "
                           "holds ",
                           held->cores(), "; unload it before changing the reservation"));
    }
    return held;
  }
  auto check = [&] {
    if (cores < 1 || cores > shared_.capacity - 1) {
      throw UsageError(cat(owner, ": cannot reserve ", cores, " core(s): ", shared_.capacity,
                           " of the ", cores_,
                           " cores are unreserved and at least one must stay "
                           "shared (reserve between 1 and ",
                           shared_.capacity - 1, ")"));
    }
  };
  check();
  // In line with the shared part's grants, so that a reservation waits its turn like them.
  const uint64_t ticket = shared_.next_ticket++;
  changed_.wait(lock, [&] {
    return shared_.serving == ticket &&
           (shared_.capacity - shared_.in_use >= cores || cores > shared_.capacity - 1);
  });
  ++shared_.serving;
  changed_.notify_all();
  check();  // another reservation may have taken cores meanwhile
  shared_.capacity -= cores;
  ++reservations_;
  std::shared_ptr<Reservation> made(new Reservation(*this, owner, cores));
  owners_[owner] = made;
  return made;
}

CorePool::Grant CorePool::acquire(int cores, Reservation* from) {
  std::unique_lock<std::mutex> lock(mutex_);
  Part& part = part_of(from);
  const uint64_t ticket = part.next_ticket++;
  changed_.wait(lock, [&] {
    return part.serving == ticket && part.capacity - part.in_use >= clamp(cores, part);
  });
  const int n = clamp(cores, part);
  part.in_use += n;
  ++part.serving;
  changed_.notify_all();  // the next in line may fit too
  return Grant(this, &part, n);
}

std::optional<CorePool::Grant> CorePool::try_acquire(int cores, Reservation* from) {
  std::lock_guard<std::mutex> lock(mutex_);
  Part& part = part_of(from);
  const int n = clamp(cores, part);
  if (part.serving != part.next_ticket || part.capacity - part.in_use < n) return std::nullopt;
  ++part.next_ticket;
  ++part.serving;
  part.in_use += n;
  return Grant(this, &part, n);
}

void CorePool::release(Part& part, int cores) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    part.in_use -= cores;
    assert(part.in_use >= 0);
  }
  changed_.notify_all();
}

void CorePool::unreserve(Reservation& r) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return r.part_.in_use == 0; });
    shared_.capacity += r.part_.capacity;
    --reservations_;
  }
  changed_.notify_all();
}

CorePool::Reservation::Reservation(CorePool& pool, std::string owner, int cores)
    : pool_(pool), owner_(std::move(owner)) {
  part_.capacity = cores;
}

CorePool::Reservation::~Reservation() { pool_.unreserve(*this); }

CorePool::Grant::Grant(Grant&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)),
      part_(std::exchange(other.part_, nullptr)),
      cores_(std::exchange(other.cores_, 0)) {}

CorePool::Grant& CorePool::Grant::operator=(Grant&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = std::exchange(other.pool_, nullptr);
    part_ = std::exchange(other.part_, nullptr);
    cores_ = std::exchange(other.cores_, 0);
  }
  return *this;
}

CorePool::Grant::~Grant() { release(); }

void CorePool::Grant::release() {
  if (pool_ && cores_ > 0) pool_->release(*part_, cores_);
  pool_ = nullptr;
  part_ = nullptr;
  cores_ = 0;
}

}  // namespace stagecraft::serve

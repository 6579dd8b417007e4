#pragma once
/// The cores of a process as a shared resource: a ledger that hands out grants of cores so that
/// several models and instances served in one process never run more kernel threads than there
/// are cores (oneDNN here runs on OpenMP: every executing thread opens its own team, and two teams
/// of all cores each on the same cores slow both down many times over).
///
/// A grant is a number of cores, not a set of core ids: the holder runs its plan on that many
/// threads and the OS places them; the ledger only guarantees that the grants held at once add up
/// to at most the cores of their pool. Cores can be reserved for one owner (a latency-critical
/// model): they leave the shared pool, and only grants made from the reservation use them.
///
/// Grants of one pool are served first come, first served: a large request waiting for cores is
/// not overtaken by later small ones (no starvation). A thread holds at most one grant at a time
/// (asking for a second while holding one can wait forever); grants are released by their
/// destructor.
///
/// Example:
///   CorePool pool(4);
///   std::shared_ptr<CorePool::Reservation> fast = pool.reserve("resnet50", 1);  // 3 stay shared
///   {
///     CorePool::Grant g = pool.acquire(0);          // all shared cores: 3 (waits for them)
///     run_plan_on(g.cores());
///   }                                               // released here
///   CorePool::Grant r = pool.acquire(0, fast.get()); // the reserved core

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace stagecraft::serve {

/// A ledger of `cores()` cores shared by grants; see the file comment.
class CorePool {
 public:
  class Reservation;
  class Grant;

  /// A pool of `cores` cores (>= 1); 0: the cores this process may run on.
  explicit CorePool(int cores = 0);
  CorePool(const CorePool&) = delete;
  CorePool& operator=(const CorePool&) = delete;
  /// Waits until every grant and reservation has been given back.
  ~CorePool();

  /// Cores of the whole pool.
  int cores() const { return cores_; }
  /// Cores not reserved (the shared part).
  int shared_cores() const;
  /// Cores granted from the shared part now (for tests and statistics).
  int shared_in_use() const;
  /// Requests (grants and reservations) waiting for the shared part now.
  int shared_waiting() const;

  /// Takes `cores` cores out of the shared part for `owner` (waits until that many are free).
  /// Throws UsageError when it would leave no shared core or `cores` < 1. The cores return to the
  /// shared part when the last holder of the reservation lets it go (after its grants). While a
  /// reservation of `owner` is held, reserving for `owner` again shares it (a model reloaded while
  /// its previous load still serves), or throws UsageError when `cores` differs.
  std::shared_ptr<Reservation> reserve(const std::string& owner, int cores);

  /// A grant of `cores` cores (0 or more than the pool has: all of the pool) from `from` (null:
  /// the shared part); waits until they are free and every earlier request is served.
  Grant acquire(int cores, Reservation* from = nullptr);
  /// The same grant if it can be given now without waiting, else nothing.
  std::optional<Grant> try_acquire(int cores, Reservation* from = nullptr);

  /// The cores the process may run on (its affinity mask; at least 1).
  static int available_cores();

 private:
  // One pool of cores with its first-come-first-served queue (the shared part, or a reservation).
  struct Part {
    int capacity = 0;
    int in_use = 0;
    uint64_t next_ticket = 0;  // tickets handed to requests
    uint64_t serving = 0;      // the ticket whose turn it is
  };
  Part& part_of(Reservation* from);
  int clamp(int cores, const Part& part) const;
  void release(Part& part, int cores);
  void unreserve(Reservation& r);

  int cores_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  Part shared_;
  int reservations_ = 0;  // alive (for the destructor)
  std::map<std::string, std::weak_ptr<Reservation>> owners_;
};

/// Cores reserved for one owner; made by CorePool::reserve, given back when destroyed.
class CorePool::Reservation {
 public:
  ~Reservation();
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  /// Who reserved them (a model name).
  const std::string& owner() const { return owner_; }
  /// Cores reserved.
  int cores() const { return part_.capacity; }

 private:
  friend class CorePool;
  Reservation(CorePool& pool, std::string owner, int cores);
  CorePool& pool_;
  std::string owner_;
  Part part_;
};

/// Cores held by one executing thread; released when destroyed (move-only).
class CorePool::Grant {
 public:
  Grant(Grant&& other) noexcept;
  Grant& operator=(Grant&& other) noexcept;
  Grant(const Grant&) = delete;
  Grant& operator=(const Grant&) = delete;
  ~Grant();
  /// Cores granted (>= 1 while held, 0 after release or a move).
  int cores() const { return cores_; }
  /// Gives the cores back now.
  void release();

 private:
  friend class CorePool;
  Grant(CorePool* pool, Part* part, int cores) : pool_(pool), part_(part), cores_(cores) {}
  CorePool* pool_ = nullptr;
  Part* part_ = nullptr;
  int cores_ = 0;
};

}  // namespace stagecraft::serve

// A simulated GPU that several processes share, for CPU tests and benchmarks of parallel trials
// [tune_train]: one counter of allocated bytes with a capacity, in shared memory
// (/dev/shm/tune-card-NAME), charged by every trial process of a run and by independent workers
// given the same card. An allocation that would exceed the card fails in whichever process
// makes it, the way a real card fails the unlucky neighbour.
//
// Each process charges its own slot, so the bytes of a process that dies (even by SIGKILL) are
// given back when the next charge finds it gone. Charges are serialised by a process-shared
// robust mutex. The trainer charges the card from the counting CPU allocator (memory.simulate);
// other programs can charge it through the C function below (ctypes, for example).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tune/status.h"

namespace tune {

class SimulatedCard {
 public:
  // Opens the card NAME, creating it with `capacity` bytes if it does not exist.
  // InvalidArgument for a bad name or capacity; FailedPrecondition when the card exists with
  // another capacity.
  static Result<std::unique_ptr<SimulatedCard>> Open(const std::string& name, int64_t capacity);
  ~SimulatedCard();
  SimulatedCard(const SimulatedCard&) = delete;
  SimulatedCard& operator=(const SimulatedCard&) = delete;

  // Allocates (bytes > 0) or frees (bytes < 0) on the card for this process. ResourceExhausted,
  // with what is in use, when an allocation does not fit.
  Status Charge(int64_t bytes);
  // Bytes in use by live processes, and this process's share.
  int64_t used() const;
  int64_t mine() const;
  int64_t capacity() const;
  const std::string& name() const { return name_; }

  // Removes the card's shared memory (the processes that have it open keep it).
  static Status Remove(const std::string& name);

  struct Shared;  // the layout in shared memory (simulated_card.cpp)

 private:
  SimulatedCard(std::string name, Shared* shared) : name_(std::move(name)), shared_(shared) {}
  std::string name_;
  Shared* shared_;
};

// The card of this process, set once by the trainer or a tool; nullptr when none.
SimulatedCard* ProcessSimulatedCard();
Status SetProcessSimulatedCard(const std::string& name, int64_t capacity);

}  // namespace tune

extern "C" {
// For programs in other languages (ctypes): charges `bytes` (negative: frees) on card `name`
// of `capacity` bytes for the calling process. 0: done; 1: does not fit (out of memory); -1:
// the card cannot be opened (a message on stderr).
int tune_simulated_card_charge(const char* name, int64_t capacity, int64_t bytes);
// Bytes in use on card `name` by live processes, or -1.
int64_t tune_simulated_card_used(const char* name, int64_t capacity);
}

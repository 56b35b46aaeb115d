// A simulated GPU that several processes share, for CPU tests and benchmarks of parallel trials
// [tune_train]: a counter of allocated bytes with a capacity in shared memory, charged by every
// trial process of a run and by independent workers given the same card, and a model of how
// processes computing at once share its time (issue 32).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tune/status.h"

namespace tune {

// The compute model's constants, fitted to 18 measurements of BERT-base training processes
// sharing an H200 (bench/gpu_corun.py; within 6 % of each): docs/benchmarks.md, "packing".
struct CardCompute {
  double slicing = 0.11;     // GPU-time overhead of time-slicing when more than one is busy
  double interleave = 0.44;  // GPU-time wait per busy co-runner whose kernels come between
};

// The factor by which the GPU time per micro-step of a busy process with busy share `own`
// stretches when `busy` processes with summed busy share `sum_busy` compute at once. A process's
// busy share alone is u = g / (g + h): the part of a micro-step its GPU time g takes beside its
// host time h (Python, the data loader, kernel launches). With k >= 2 processes busy at once
// (measured on an H200: docs/benchmarks.md, "Co-running trials on a real card"), a micro-step
// takes the longer of its own step with its GPU time stretched by time-slicing and by waiting for
// the co-runners' kernels, which do not overlap with its own, h + g (1 + slicing)(1 + interleave
// (k - 1)), and its share of a saturated card, (g + h) Σu (1 + slicing). So: max(1, sum_busy)
// when busy <= 1, else max((1 + slicing)(1 + interleave (busy - 1)), (sum_busy (1 + slicing) -
// (1 - own)) / own), the second term only when own > 0.
double GpuStretch(int64_t busy, double sum_busy, double own, const CardCompute& compute = {});

// What computes on the card now: the processes with a busy share > 0 and their sum.
struct CardLoad {
  int64_t busy = 0;
  double sum_busy = 0;
};

// The micro-steps of a process: GPU time and host time per micro-step alone (simulated seconds).
struct MicroSteps {
  double count = 0;
  double gpu_seconds = 0;
  double host_seconds = 0;
  double busy_share() const {
    const double step = gpu_seconds + host_seconds;
    return step > 0 ? gpu_seconds / step : 0.0;
  }
};

// Each process charges its own slot, so the bytes of a process that dies (even by SIGKILL) are
// given back when the next charge finds it gone. Charges are serialised across processes by a
// process-shared robust mutex. The trainer charges the card from the counting CPU allocator
// (memory.simulate); other programs through the C functions below (ctypes, for example).
class SimulatedCard {
 public:
  // Opens the card NAME (shared memory /dev/shm/tune-card-NAME), creating it with `capacity`
  // bytes if it does not exist.
  // InvalidArgument for a bad name or capacity; FailedPrecondition when the card exists with
  // another capacity.
  static Result<std::unique_ptr<SimulatedCard>> Open(const std::string& name, int64_t capacity);
  ~SimulatedCard();
  SimulatedCard(const SimulatedCard&) = delete;
  SimulatedCard& operator=(const SimulatedCard&) = delete;

  // Allocates (bytes > 0) or frees (bytes < 0) on the card for this process. ResourceExhausted,
  // with what is in use, when an allocation does not fit: an allocation that would exceed the
  // card fails in whichever process makes it, the way a real card fails the unlucky neighbour.
  Status Charge(int64_t bytes);
  // Bytes in use by live processes, and this process's share.
  int64_t used() const;
  int64_t mine() const;
  int64_t capacity() const;
  // (pid, bytes) of each live process holding memory on the card.
  std::vector<std::pair<pid_t, int64_t>> holders() const;
  const std::string& name() const { return name_; }

  // Sets this process's busy share alone (0: it does not compute, e.g. while it starts up).
  // InvalidArgument outside [0, 1]; ResourceExhausted when the card has no free slot.
  Status SetBusy(double share);
  // The busy processes that are alive and their summed busy share.
  CardLoad load() const;
  // Runs `steps` on the card: sets this process busy, advances through the micro-steps as
  // GpuStretch(load(), its busy share) allows, re-reading the load every few milliseconds, and sets
  // it idle again. Simulated seconds pass `time_scale` times faster than real ones (time_scale =
  // 0.01: one simulated second takes 10 ms). Returns the simulated seconds the steps took.
  Result<double> RunSteps(const MicroSteps& steps, double time_scale,
                          const CardCompute& compute = {});

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
// The busy processes on card `name` (-1: it cannot be opened); their summed busy share in
// *sum_busy when not null.
int64_t tune_simulated_card_load(const char* name, int64_t capacity, double* sum_busy);
}

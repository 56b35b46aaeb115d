// A card that trials share under --jobs [tune_core]: what is read from it now and what the run's
// own trials hold there. The one card type of the scheduler (study/jobs_queue.h), the objectives
// (Objective::CardsNow), the memory guard's readers (memory/cards.h) and the status line
// (JobsState).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tune/trial.h"

namespace tune {

struct Card {
  // Read from the card (Objective::CardsNow).
  std::string name;  // "cuda:2", "card 1"; "" when the trials share one device
  // The bytes trials may reserve there now: its memory less what other processes hold
  // (card_others.h), less the guard's margin. None: nothing is reserved (--jobs N runs N).
  std::optional<int64_t> budget;
  std::optional<DeviceBusy> busy;     // what computes there now (a simulated card); none: unknown
  std::optional<double> utilization;  // its driver's reading (NVML), in [0, 1]; none: unknown

  // What the run's own trials hold there (the scheduler's bookkeeping).
  int64_t running = 0;
  int64_t reserved = 0;  // bytes the running trials reserve
  int64_t limit = 1;     // the most trials at once on it
  // The running trials already use the compute allowed (RunSettings::max_busy): no other trial
  // starts beside them, whatever its memory.
  bool compute_full = false;
  bool largest = true;  // MarkLargest's answer
};

// "Largest", the one meaning tune gives it: the largest budget now. LargestBudget is that budget
// (nullopt when no card's is known); LargestCard the index of the first card that has it (0 when
// none is known); MarkLargest sets every card's `largest` (every card when none is known). Budgets
// change as other processes come and go: ask again each time.
std::optional<int64_t> LargestBudget(const std::vector<Card>& cards);
size_t LargestCard(const std::vector<Card>& cards);
void MarkLargest(std::vector<Card>& cards);

}  // namespace tune

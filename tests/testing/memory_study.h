// A study in memory (random sampler, no pruner, one objective) and a trial asked of it, for
// tests that need a real TrialHandle.
#pragma once

#include <memory>
#include <string>

#include "tune/pruners/pruner.h"
#include "tune/samplers/random.h"
#include "tune/storages/in_memory.h"
#include "tune/study.h"

namespace tune::testing {

struct MemoryStudy {
  std::unique_ptr<Study> study;
  std::unique_ptr<Trial> trial;  // the study's first trial, running

  explicit MemoryStudy(const std::string& name,
                       StudyDirection direction = StudyDirection::kMinimize)
      : study(std::move(Study::CreateOrLoad(NewInMemoryStorage(), name, {direction},
                                            std::make_unique<RandomSampler>(),
                                            std::make_unique<NopPruner>(), 1))
                  .value()),
        trial(std::move(study->Ask()).value()) {}
};

}  // namespace tune::testing

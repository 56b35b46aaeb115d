// Several forked processes sharing one study through a storage backend, for the SQLite and
// PostgreSQL storage tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "tune/storages/storage.h"

namespace tune::testing {

// Opens the backend anew (in each forked process and in the parent).
using StorageOpener = std::function<Result<std::unique_ptr<Storage>>()>;

// Creates study "shared" with `enqueued` WAITING trials, forks `workers` processes that each
// open the storage and run `trials` ask/tell cycles (claiming enqueued trials first), like tune
// workers sharing a study, and checks that no trial was lost or duplicated: workers*trials
// COMPLETE trials numbered 0.., each worker's `trials` of them, each enqueued trial run once and
// first. Returns the study id.
inline int64_t ExpectProcessesShareAStudy(const StorageOpener& open, int workers, int trials,
                                          int enqueued) {
  int64_t sid = 0;
  {
    auto s = open();
    EXPECT_TRUE(s.ok()) << s.status().message();
    if (!s.ok()) return 0;
    sid = *(*s)->CreateStudy("shared", {StudyDirection::kMinimize});
    for (int i = 0; i < enqueued; ++i) {
      FrozenTrial templ;
      templ.state = TrialState::kWaiting;
      templ.system_attrs["fixed_params"] = {{"x", i}};
      EXPECT_TRUE((*s)->CreateTrial(sid, &templ).ok());
    }
  }
  std::vector<pid_t> pids;
  for (int w = 0; w < workers; ++w) {
    pid_t pid = fork();
    EXPECT_GE(pid, 0);
    if (pid < 0) break;
    if (pid == 0) {
      int errors = 0;
      auto opened = open();
      if (!opened.ok()) _exit(100);
      auto& s = *opened;
      for (int i = 0; i < trials; ++i) {
        auto claimed = s->ClaimWaitingTrial(sid);
        if (!claimed.ok()) {
          ++errors;
          continue;
        }
        FrozenTrial t;
        if (claimed->has_value()) {
          t = **claimed;
        } else {
          auto created = s->CreateTrial(sid);
          if (!created.ok()) {
            ++errors;
            continue;
          }
          t = *created;
        }
        errors += !s->SetTrialParam(t.trial_id, "w", w, *MakeIntDistribution(0, 100)).ok();
        errors += !s->SetTrialIntermediateValue(t.trial_id, 0, i).ok();
        errors += !s->GetTrialsSince(sid, std::max<int64_t>(0, t.number - 3), {}).ok();
        auto told = s->SetTrialStateValues(t.trial_id, TrialState::kComplete, {1.0 * i});
        errors += !(told.ok() && *told);
      }
      _exit(errors > 99 ? 99 : errors);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "worker errors (100: could not open)";
  }
  auto s = open();
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return sid;
  auto all = *(*s)->GetAllTrials(sid);
  EXPECT_EQ(all.size(), static_cast<size_t>(workers * trials));
  std::set<int64_t> ids;
  std::map<int, int> per_worker;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].number, static_cast<int64_t>(i));
    EXPECT_EQ(all[i].state, TrialState::kComplete) << i;
    EXPECT_EQ(all[i].params.count("w"), 1u) << i;
    if (!all[i].params.count("w")) continue;
    EXPECT_EQ(all[i].values.size(), 1u);
    ids.insert(all[i].trial_id);
    ++per_worker[static_cast<int>(all[i].params.at("w"))];
    // The enqueued trials come first and each was claimed by exactly one worker.
    EXPECT_EQ(all[i].system_attrs.contains("fixed_params"), static_cast<int>(i) < enqueued) << i;
  }
  EXPECT_EQ(ids.size(), all.size());
  for (int w = 0; w < workers; ++w) EXPECT_EQ(per_worker[w], trials) << "worker " << w;
  return sid;
}

}  // namespace tune::testing

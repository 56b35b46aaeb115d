// `tune delete-study --study NAME`: removes a study and all its trials (Optuna's delete-study).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "app.h"

namespace tune::app {

int DeleteStudy(const DeleteStudyArgs& args) {
  auto storage = OpenStorage(args.storage, StorageAccess::kExisting);
  if (!storage.ok()) return Fail(storage.status());
  auto id = (*storage)->GetStudyId(args.study);
  if (!id.ok()) return Fail(id.status());
  auto info = (*storage)->GetStudy(*id);
  if (!info.ok()) return Fail(info.status());
  auto running = (*storage)->CountTrials(*id, {TrialState::kRunning});
  if (!running.ok()) return Fail(running.status());
  if (*running > 0) {
    spdlog::warn("Study '{}' has {} RUNNING trial(s); workers still running it will fail",
                 args.study, *running);
  }
  if (Status s = (*storage)->DeleteStudy(*id); !s.ok()) return Fail(s);
  spdlog::info("Deleted study '{}' and its {} trial(s) from {}", args.study, info->n_trials,
               (*storage)->url());
  return kExitOk;
}

}  // namespace tune::app

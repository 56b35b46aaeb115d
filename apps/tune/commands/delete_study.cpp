// `tune delete-study --study NAME`: removes a study and all its trials (Optuna's delete-study).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "app.h"
#include "commands.h"

namespace tune::app {

int DeleteStudy(const DeleteStudyArgs& args) {
  auto opened = OpenStoredStudy(args.storage, args.study, StorageAccess::kExisting);
  if (!opened.ok()) return Fail(opened.status());
  Storage& storage = *opened->storage;
  const int64_t id = opened->id;
  auto info = storage.GetStudy(id);
  if (!info.ok()) return Fail(info.status());
  auto running = storage.CountTrials(id, {TrialState::kRunning});
  if (!running.ok()) return Fail(running.status());
  if (*running > 0) {
    spdlog::warn("Study '{}' has {} RUNNING trial(s); workers still running it will fail",
                 args.study, *running);
  }
  if (Status s = storage.DeleteStudy(id); !s.ok()) return Fail(s);
  spdlog::info("Deleted study '{}' and its {} trial(s) from {}", args.study, info->n_trials,
               storage.url());
  return kExitOk;
}

std::function<int()> DeclareDeleteStudy(CLI::App& command) {
  auto args = std::make_shared<DeleteStudyArgs>();
  command.add_option("--study,--study-name", args->study, "Study name")->required();
  command.add_option("--storage", args->storage,
                     "Storage URL: sqlite:///PATH (default: sqlite:///tune.db); never created");
  return [args] { return DeleteStudy(*args); };
}

}  // namespace tune::app

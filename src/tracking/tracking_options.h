// Where a study's trials are shown besides its storage ("tracking" in a study config,
// --mlflow-uri, `tune export --mlflow`): an MLflow tracking server and a TensorBoard log
// directory. docs/config.md ("tracking") documents the keys.
#pragma once

#include <optional>
#include <string>

#include "tune/status.h"

namespace tune {

struct MlflowOptions {
  // The tracking server: http://HOST[:PORT][/PREFIX] or https://... (MLflow's REST API).
  std::string uri;
  // The MLflow experiment the study's runs go to; "" (the default): the study's name.
  std::string experiment;
  // How many trials are recorded at once, each over its own connection (`mlflow server` runs
  // 4 worker processes by default).
  int concurrency = kDefaultMlflowConcurrency;
  static constexpr int kDefaultMlflowConcurrency = 4;
};

struct TrackingOptions {
  std::optional<MlflowOptions> mlflow;
  // TensorBoard's log directory: one run directory per trial under DIR/<study>/ and the study's
  // own (DIR/<study>/study). Absolute once read from a config (relative to the config's folder).
  std::optional<std::string> tensorboard;

  bool empty() const { return !mlflow && !tensorboard; }
};

// Ok for http://HOST... and https://HOST...; InvalidArgument naming the URI and what is
// accepted otherwise (a file: store, a databricks URI, a bare host).
Status CheckMlflowUri(const std::string& uri);

// Ok when this build can reach an MLflow server; Unavailable, naming what to install, when it was
// built without libcurl. Checked after the tracking options themselves, so that their own errors
// come first.
Status CheckMlflowSupported();

}  // namespace tune

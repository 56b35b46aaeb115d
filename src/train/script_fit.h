// Measured memory fits of TorchScript models [tune_train]: tune has no formula for a user's own
// module, so it measures the peak of training steps at a few small shapes on the trial's device
// and fits peak(B, T) = a + b·B·T + c·B·T² (measured_fit.h) from them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "measure/measured_fit.h"
#include "measure/probe_shapes.h"  // ProbeShape
#include "train/hyperparams.h"
#include "train/trainer.h"
#include "tune/model_catalog.h"
#include "tune/status.h"

namespace tune {

// (1, 32), (2, 32), (4, 32), (2, 64), (4, 64): B <= 4, T <= 64, two lengths. The fit holds out
// (4, 64), the largest B·T², and checks it with the others.
std::vector<ProbeShape> DefaultScriptProbes();

// The probes of growth round `round`: `first` with the tokens of every shape doubled each round,
// B and T in turn ((1, 1), (2, 1), (2, 2), (4, 2), (4, 4) times the first shapes for rounds 0-4).
std::vector<ProbeShape> GrownProbes(const std::vector<ProbeShape>& first, int round);

struct ScriptFitRequest {
  ModelSpec model;  // a TorchScript model (model.torchscript)
  // The trial's (its precision); shape, optimizer and levers are the probe's: always AdamW (the
  // larger optimizer state; a study that trains with SGD is planned conservatively), without
  // accumulation or checkpointing.
  TrainHyperparams hp;
  int64_t num_labels = 2;
  std::vector<ProbeShape> probes = DefaultScriptProbes();
  int max_rounds = 4;  // growth rounds after the first probes (4: up to 4 x B and 4 x T)
};

// Where fits outlive the process: the study's system attributes (the train objective's adapter
// over its TrialHandle); tests use a map.
class FitStore {
 public:
  virtual ~FitStore() = default;
  // The value stored under `key`; nullopt when there is none.
  virtual Result<std::optional<Json>> Get(const std::string& key) = 0;
  virtual Status Put(const std::string& key, const Json& value) = 0;
};

// Measures the probes of `request` with `trainer` (MeasureTrainingPeak: CPU under the counting
// allocator, CUDA the caching allocator's allocated peak; each probe runs two AdamW steps, so the
// peak covers the steady state after the first step, when the optimizer's moments exist) and
// fits them, the fit named `model_hash`. The floor is the smallest probe's peak: where a model's
// activations are small beside its weights (an LSTM, a CNN), small shapes all peak in the
// optimizer step, at the floor, and show nothing of how the activations grow. The fit takes only
// the probes at least MeasuredFit::kFloorBand above the floor; while fewer than kMinPoints (with
// two lengths) are, the probes grow (GrownProbes), at most max_rounds rounds; if they still are
// not, every probe is fitted, the floor still bounding the fit below. Internal naming the shape
// when a probe of the first round does not complete (out of memory included; in a later round the
// growth stops there); FailedPrecondition when the trainer does not measure memory or the probes
// cannot be fitted.
Result<MeasuredFit> ProbeScriptMemory(Trainer& trainer, const ScriptFitRequest& request,
                                      const std::string& model_hash);

// The fits of TorchScript models, by content hash and precision.
// Thread safety: none; one objective's trials ask it one at a time.
class ScriptFitCache {
 public:
  // The fit of request.model at request.hp.precision: the one in memory, else the one `store`
  // holds (store may be null) under MeasuredFitKey("sha256:<hex>", precision), else measured now
  // with `trainer` (ProbeScriptMemory) and put in both. A fit is named by the file's contents
  // (ContentHash), so a resumed study or another process reuses it, and a changed file is probed
  // again while an unchanged one is not. FailedPrecondition without a trainer; the error of a
  // measurement that failed, without measuring again.
  Result<MeasuredFit> Get(Trainer* trainer, const ScriptFitRequest& request, FitStore* store);
  // Adds a fit made elsewhere (a child process gets its parent's).
  void Add(const MeasuredFit& fit) { fits_[MeasuredFitKey(fit.model, fit.precision)] = fit; }
  // "sha256:<hex>" of the file at `path`, computed again only when its size or modification
  // time changed. NotFound when it cannot be read.
  Result<std::string> ContentHash(const std::string& path);
  // How many fits this cache measured (tests).
  int64_t probed() const { return probed_; }

 private:
  struct HashedFile {
    int64_t size = -1;
    int64_t mtime_ns = 0;
    std::string hash;
  };
  std::map<std::string, MeasuredFit> fits_;   // by MeasuredFitKey
  std::map<std::string, Status> failed_;      // probes that failed, by MeasuredFitKey
  std::map<std::string, HashedFile> hashes_;  // by path
  int64_t probed_ = 0;
};

}  // namespace tune

// CUDA graphs for the trainer's step [tune_torch, private]: one run's side stream, the memory
// pool its graphs share, and capture with failure as a value. Built with a LibTorch that has
// CUDA, 2.4 or newer; elsewhere CudaGraphsBuilt() is false and nothing here may be constructed.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>

namespace tune::internal {

// Whether this build can capture CUDA graphs.
bool CudaGraphsBuilt();

// A captured graph: Replay() queues all of its kernels on the run's stream at once.
class CapturedGraph {
 public:
  virtual ~CapturedGraph() = default;
  virtual void Replay() = 0;
};

// One training run's CUDA graphs. While it exists, the run's work goes to a side stream of
// `device` (a capture cannot use the legacy default stream); it starts after everything queued
// before on the current stream, and the current stream waits for it when it ends. The graphs
// share one private memory pool: they replay one at a time, in this thread, and what one leaves
// for the host to read (its outputs) stays allocated until the graph goes. Captures use
// cudaStreamCaptureModeThreadLocal, so that other trials' threads in the process may go on using
// the device.
class CudaGraphRun {
 public:
  explicit CudaGraphRun(const torch::Device& device);  // REQUIRES: CudaGraphsBuilt(), CUDA
  ~CudaGraphRun();
  CudaGraphRun(const CudaGraphRun&) = delete;
  CudaGraphRun& operator=(const CudaGraphRun&) = delete;

  // Captures what `work` queues on the run's stream (nothing runs: replay the graph to run it).
  // nullptr with `error` set when the capture fails (an operation that waits for the host or
  // otherwise cannot be captured): the run then goes on without graphs.
  std::unique_ptr<CapturedGraph> Capture(const std::function<void()>& work, std::string& error);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune::internal

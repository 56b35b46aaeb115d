#include "torch/torch_cuda_graphs.h"

#include "torch/torch_version.h"

#if defined(TUNE_WITH_CUDA) && TUNE_TORCH_AT_LEAST(2, 4)
#define TUNE_CUDA_GRAPHS_ON 1
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

#include <optional>

namespace tune::internal {

bool CudaGraphsBuilt() {
#ifdef TUNE_CUDA_GRAPHS_ON
  return true;
#else
  return false;
#endif
}

#ifdef TUNE_CUDA_GRAPHS_ON

namespace {

class Graph final : public CapturedGraph {
 public:
  explicit Graph(std::unique_ptr<at::cuda::CUDAGraph> graph) : graph_(std::move(graph)) {}
  void Replay() override { graph_->replay(); }

 private:
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
};

// `to` waits (on the device) for what is queued on `from` so far.
void StreamWaits(const c10::cuda::CUDAStream& to, const c10::cuda::CUDAStream& from) {
  at::cuda::CUDAEvent event;
  event.record(from);
  event.block(to);
}

// Ends a capture that `work` abandoned (CUDA has invalidated it; capture_end says so).
void EndFailedCapture(at::cuda::CUDAGraph& graph) {
  try {
    graph.capture_end();
  } catch (const std::exception&) {
  }
  (void)cudaGetLastError();  // capture errors are not sticky: clear this thread's last error
}

}  // namespace

struct CudaGraphRun::Impl {
  explicit Impl(const torch::Device& device)
      : outer(c10::cuda::getCurrentCUDAStream(device.index())),
        side(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())),
        pool(at::cuda::graph_pool_handle()) {
    StreamWaits(side, outer);
    guard.emplace(side);
  }
  ~Impl() {
    guard.reset();
    StreamWaits(outer, side);
  }
  c10::cuda::CUDAStream outer, side;
  at::cuda::MempoolId_t pool;
  std::optional<c10::cuda::CUDAStreamGuard> guard;
};

CudaGraphRun::CudaGraphRun(const torch::Device& device) : impl_(std::make_unique<Impl>(device)) {}

CudaGraphRun::~CudaGraphRun() = default;

std::unique_ptr<CapturedGraph> CudaGraphRun::Capture(const std::function<void()>& work,
                                                     std::string& error) {
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  bool begun = false;
  try {
    graph->capture_begin(impl_->pool, cudaStreamCaptureModeThreadLocal);
    begun = true;
    work();
    begun = false;
    graph->capture_end();
  } catch (const c10::OutOfMemoryError&) {  // the guard's business, not a capture's failure
    if (begun) EndFailedCapture(*graph);
    throw;
  } catch (const std::exception& e) {
    error = e.what();
    if (begun) EndFailedCapture(*graph);
    return nullptr;
  }
  return std::make_unique<Graph>(std::move(graph));
}

#else

struct CudaGraphRun::Impl {};

CudaGraphRun::CudaGraphRun(const torch::Device&) {
  TORCH_CHECK(false, "CUDA graphs need tune_torch built with a LibTorch with CUDA, 2.4 or newer");
}

CudaGraphRun::~CudaGraphRun() = default;

std::unique_ptr<CapturedGraph> CudaGraphRun::Capture(const std::function<void()>&,
                                                     std::string& error) {
  error = "CUDA graphs are not built in";
  return nullptr;
}

#endif

}  // namespace tune::internal

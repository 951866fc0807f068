// Graph capture and replay: a window's op sequence for one T (and a commit's for one (T, n)) is
// recorded once from the decoder's stream and replayed; its inputs live in device memory.
#include "decoder_internal.h"

namespace strata::cuda {

Graph::~Graph() {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
}

Result<std::unique_ptr<Graph>> Graph::capture(cudaStream_t stream, const std::function<Status()>& body) {
  // Thread-local mode: other host threads (the reference's pool in parity) may use CUDA meanwhile.
  DECODER_CUDA_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const Status st = body();
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  auto g = std::make_unique<Graph>();
  g->graph_ = graph;  // destroyed with g on every path below
  if (!st.ok()) {
    cudaGetLastError();  // an invalidated capture leaves an error behind; the op's Status says why
    return Status::error("cuda decoder: while capturing a graph: " + st.message());
  }
  DECODER_CUDA_TRY(end);
  DECODER_CUDA_TRY(cudaGraphInstantiate(&g->exec_, graph, 0));
  size_t n = 0;
  DECODER_CUDA_TRY(cudaGraphGetNodes(graph, nullptr, &n));
  g->nodes_ = static_cast<int64_t>(n);
  return g;
}

Status Graph::launch(cudaStream_t stream) const {
  DECODER_CUDA_TRY(cudaGraphLaunch(exec_, stream));
  return Status::ok_status();
}

}  // namespace strata::cuda

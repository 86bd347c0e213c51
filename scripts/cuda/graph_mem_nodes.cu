// What a CUDA graph's memory nodes cost at replay (issue 13). memctl's captured training step
// holds as many allocation and free nodes as kernels (STM config A: 4 743 of each beside 5 000
// kernels on an H200), because candle allocates each op's output with cuMemAllocAsync and a
// capture records every such call as a node; PyTorch's caching allocator records none.
//
// Two graphs of the same chain of K small kernels, replayed R times each:
//   with memory nodes: each kernel's output is allocated just before it and its input freed
//                      after it, as candle does inside memctl's capture;
//   without:           the kernels alternate between two buffers allocated before capture.
// Prints the replay time per kernel of each and their difference per memory node.
// Build here: bash scripts/cuda/build_graph_mem_nodes.sh (into .gpu/); run on the GPU machine:
// .gpu/graph_mem_nodes [K [R [ELEMENTS]]]
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(call)                                                                      \
  do {                                                                                   \
    cudaError_t e = (call);                                                              \
    if (e != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

__global__ void add_one(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] + 1.0f;
}

// Captures the chain on `stream`; with_memory_nodes chooses how outputs are allocated. Both
// graphs end with one copy into `first`, so that they differ in their memory nodes alone.
static cudaGraphExec_t capture(cudaStream_t stream, float* first, float* spare, int k, int n, bool with_memory_nodes,
                               size_t* nodes, size_t* memory_nodes) {
  int blocks = (n + 255) / 256;
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  float* in = first;
  for (int i = 0; i < k; ++i) {
    float* out;
    if (with_memory_nodes) {
      CHECK(cudaMallocAsync(reinterpret_cast<void**>(&out), n * sizeof(float), stream));
    } else {
      out = (in == first) ? spare : first;
    }
    add_one<<<blocks, 256, 0, stream>>>(in, out, n);
    if (with_memory_nodes && in != first) CHECK(cudaFreeAsync(in, stream));
    in = out;
  }
  // The chain's result back into `first` (from `spare` when it ended in `first` already: the
  // values do not matter, the same work in both graphs does).
  CHECK(cudaMemcpyAsync(first, in == first ? spare : in, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  if (with_memory_nodes && in != first) CHECK(cudaFreeAsync(in, stream));
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphGetNodes(graph, nullptr, nodes));
  cudaGraphNode_t* all = static_cast<cudaGraphNode_t*>(std::malloc(*nodes * sizeof(cudaGraphNode_t)));
  CHECK(cudaGraphGetNodes(graph, all, nodes));
  *memory_nodes = 0;
  for (size_t i = 0; i < *nodes; ++i) {
    cudaGraphNodeType type;
    CHECK(cudaGraphNodeGetType(all[i], &type));
    if (type == cudaGraphNodeTypeMemAlloc || type == cudaGraphNodeTypeMemFree) ++*memory_nodes;
  }
  std::free(all);
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphDestroy(graph));
  return exec;
}

// The mean time of `replays` launches after two warm-up launches, in µs per launch.
static double time_replays(cudaGraphExec_t exec, cudaStream_t stream, int replays) {
  for (int i = 0; i < 2; ++i) CHECK(cudaGraphLaunch(exec, stream));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < replays; ++i) CHECK(cudaGraphLaunch(exec, stream));
  CHECK(cudaEventRecord(stop, stream));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  return 1e3 * ms / replays;
}

int main(int argc, char** argv) {
  int k = argc > 1 ? std::atoi(argv[1]) : 5000;
  int replays = argc > 2 ? std::atoi(argv[2]) : 50;
  int n = argc > 3 ? std::atoi(argv[3]) : 4096;
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float *first, *spare;
  CHECK(cudaMalloc(&first, n * sizeof(float)));
  CHECK(cudaMalloc(&spare, n * sizeof(float)));
  CHECK(cudaMemset(first, 0, n * sizeof(float)));
  size_t nodes_with = 0, nodes_without = 0, memory_nodes = 0, memory_nodes_without = 0;
  cudaGraphExec_t with = capture(stream, first, spare, k, n, true, &nodes_with, &memory_nodes);
  cudaGraphExec_t without = capture(stream, first, spare, k, n, false, &nodes_without, &memory_nodes_without);
  // Alternate, twice each, so that clocks and caches treat both alike; keep the better of each.
  double t_with = 1e30, t_without = 1e30;
  for (int round = 0; round < 2; ++round) {
    double a = time_replays(with, stream, replays), b = time_replays(without, stream, replays);
    t_with = a < t_with ? a : t_with;
    t_without = b < t_without ? b : t_without;
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("graph_mem_nodes device=\"%s\" kernels=%d elements=%d replays=%d\n", prop.name, k, n, replays);
  std::printf("  with memory nodes:    %zu nodes, %.1f us per replay, %.3f us per kernel\n", nodes_with, t_with, t_with / k);
  std::printf("  without memory nodes: %zu nodes, %.1f us per replay, %.3f us per kernel\n", nodes_without, t_without,
              t_without / k);
  std::printf("  difference: %.1f us per replay, %.3f us per memory node (%zu of them)\n", t_with - t_without,
              memory_nodes ? (t_with - t_without) / memory_nodes : 0.0, memory_nodes);
  return 0;
}

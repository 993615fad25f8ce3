// How long the device idles between replays of captured graphs, and what the executor's per-step pattern
// adds to it: a 28-kernel graph (a chain with one fork onto a second stream and a join, like a training
// step) replayed back to back; the same with an event record and a cross-stream wait between replays; the
// same plus a one-memcpy transfer graph on a third stream that each replay waits for, into one of two
// buffers, issued once the step two back has read it (Executor::train_step); that with a plain memcpy.
// Prints microseconds per replay for each pattern and for the graph's kernels alone (one graph holding ten
// copies of the chain, per copy). A diagnostic for the GPU machine: bench_graph_gap.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "graph_gap: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

__global__ void busy_kernel(float* p, int n, int iters) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = p[i];
  for (int k = 0; k < iters; ++k) v = v * 0.999f + 0.001f;
  p[i] = v;
}

// Ends the capture on s and instantiates what it recorded.
cudaGraphExec_t end_capture(cudaStream_t s) {
  cudaGraph_t g;
  check(cudaStreamEndCapture(s, &g), "end capture");
  cudaGraphExec_t exec;
  check(cudaGraphInstantiate(&exec, g, 0), "instantiate");
  cudaGraphDestroy(g);
  return exec;
}

// `copies` chains of 27 kernels on s, the 14th forking a 1-kernel branch onto `side` that joins at the end.
cudaGraphExec_t capture_step(cudaStream_t s, cudaStream_t side, float* buf, int copies) {
  cudaEvent_t fork, join;
  check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "event");
  check(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), "event");
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
  for (int c = 0; c < copies; ++c)
    for (int k = 0; k < 27; ++k) {
      busy_kernel<<<264, 256, 0, s>>>(buf, 264 * 256, 2000);
      if (k == 13) {
        check(cudaEventRecord(fork, s), "fork");
        check(cudaStreamWaitEvent(side, fork, 0), "fork wait");
        busy_kernel<<<8, 256, 0, side>>>(buf + 264 * 256, 8 * 256, 2000);
        check(cudaEventRecord(join, side), "join");
      }
      if (k == 26) check(cudaStreamWaitEvent(s, join, 0), "join wait");
    }
  return end_capture(s);
}

cudaGraphExec_t capture_copy(cudaStream_t t, float* dst, const float* host, size_t bytes) {
  check(cudaStreamBeginCapture(t, cudaStreamCaptureModeThreadLocal), "begin capture");
  check(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, t), "memcpy");
  return end_capture(t);
}

}  // namespace

int main() {
  cudaStream_t s, side, t;
  for (cudaStream_t* x : {&s, &side, &t})
    check(cudaStreamCreateWithFlags(x, cudaStreamNonBlocking), "stream");
  float *buf, *in[2], *host[2];
  const size_t copy_bytes = 806912;
  check(cudaMalloc(&buf, 1 << 22), "malloc");
  for (int x = 0; x < 2; ++x) {
    check(cudaMalloc(&in[x], copy_bytes), "malloc");
    check(cudaMallocHost(&host[x], copy_bytes), "host malloc");
  }
  cudaGraphExec_t step = capture_step(s, side, buf, 1), ten = capture_step(s, side, buf, 10);
  cudaGraphExec_t copy[2] = {capture_copy(t, in[0], host[0], copy_bytes),
                             capture_copy(t, in[1], host[1], copy_bytes)};
  cudaEvent_t t0, t1, copied[2], consumed[2];
  check(cudaEventCreate(&t0), "event");
  check(cudaEventCreate(&t1), "event");
  for (int x = 0; x < 2; ++x) {
    check(cudaEventCreateWithFlags(&copied[x], cudaEventDisableTiming), "event");
    check(cudaEventCreateWithFlags(&consumed[x], cudaEventDisableTiming), "event");
  }
  const int n = 2000;
  auto time = [&](const char* name, int pattern) {
    for (int warm = 0; warm < 2; ++warm) {
      check(cudaEventRecord(t0, s), "record");
      const int reps = pattern == 3 ? n / 10 : n;
      for (int i = 0; i < reps; ++i) {
        const int x = i % 2;
        if (pattern == 2 || pattern == 4) {  // transfer into buffer x on t after the step two back read it
          check(cudaStreamWaitEvent(t, consumed[x], 0), "wait");
          if (pattern == 2)
            check(cudaGraphLaunch(copy[x], t), "launch copy");
          else
            check(cudaMemcpyAsync(in[x], host[x], copy_bytes, cudaMemcpyHostToDevice, t), "memcpy");
          check(cudaEventRecord(copied[x], t), "record");
          check(cudaStreamWaitEvent(s, copied[x], 0), "wait");
        } else if (pattern == 1) {
          check(cudaEventRecord(copied[0], side), "record");
          check(cudaStreamWaitEvent(s, copied[0], 0), "wait");
        }
        check(cudaGraphLaunch(pattern == 3 ? ten : step, s), "launch");
        if (pattern == 2 || pattern == 4) check(cudaEventRecord(consumed[x], s), "record");
      }
      check(cudaEventRecord(t1, s), "record");
      check(cudaEventSynchronize(t1), "sync");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, t0, t1), "elapsed");
      if (warm) std::printf("%-58s %8.2f us per step\n", name, 1000.0 * ms / n);
    }
  };
  time("kernels alone (ten chains in one graph, per chain)", 3);
  time("graph replays back to back", 0);
  time("replays with a record and a cross-stream wait between", 1);
  time("replays each waiting for a transfer graph (train_step)", 2);
  time("the same with the transfer a plain cudaMemcpyAsync", 4);
  return 0;
}

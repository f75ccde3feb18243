// Device memory and streams: thin checked wrappers over the CUDA runtime (cuda_api.h).
// Copies and memsets are asynchronous on the given stream (cudaMemcpyAsync: from pageable host
// memory the runtime stages the copy and returns once the source may be reused).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>

#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/matmul_internal.h"

namespace strata::kernels::cuda {

using detail::cuda_status;

namespace {
// Checked calls left until the injected fault (0: disarmed). Atomic: the weight store's copy thread
// checks calls too.
std::atomic<uint64_t> g_fault_countdown{0};
std::once_flag g_fault_env_once;

void arm_from_environment() {
  const char* e = std::getenv("STRATA_INJECT_CUDA_ERROR");
  if (e && *e) g_fault_countdown = std::strtoull(e, nullptr, 10);
}
}  // namespace

void inject_error(uint64_t nth_call) {
  std::call_once(g_fault_env_once, [] {});  // an explicit arm wins over the environment
  g_fault_countdown = nth_call;
}

bool detail::injected_error_fires() {
  std::call_once(g_fault_env_once, arm_from_environment);
  uint64_t left = g_fault_countdown.load(std::memory_order_relaxed);
  while (left > 0) {
    if (g_fault_countdown.compare_exchange_weak(left, left - 1)) return left == 1;
  }
  return false;
}

Result<void*> device_alloc(size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();  // an out-of-memory error is not sticky; clear it for the next call
    return Status::error("device_alloc {} bytes: {}", bytes, cudaGetErrorString(err));
  }
  return p;
}

void device_free(void* d_ptr) {
  if (d_ptr) cudaFree(d_ptr);  // errors here are reported by the next checked call
}

Status copy_to_device(void* d_dst, const void* src, size_t bytes, Stream s) {
  if (bytes == 0) return Status::ok();
  if (!d_dst || !src) return Status::error("copy_to_device: null pointer");
  return cuda_status(cudaMemcpyAsync(d_dst, src, bytes, cudaMemcpyHostToDevice, cudaStream_t(s)),
                     fmt::format("copy_to_device {} bytes", bytes));
}

Status copy_on_device(void* d_dst, const void* d_src, size_t bytes, Stream s) {
  if (bytes == 0) return Status::ok();
  if (!d_dst || !d_src) return Status::error("copy_on_device: null pointer");
  return cuda_status(cudaMemcpyAsync(d_dst, d_src, bytes, cudaMemcpyDeviceToDevice, cudaStream_t(s)),
                     fmt::format("copy_on_device {} bytes", bytes));
}

Status copy_to_host(void* dst, const void* d_src, size_t bytes, Stream s) {
  if (bytes == 0) return Status::ok();
  if (!dst || !d_src) return Status::error("copy_to_host: null pointer");
  return cuda_status(cudaMemcpyAsync(dst, d_src, bytes, cudaMemcpyDeviceToHost, cudaStream_t(s)),
                     fmt::format("copy_to_host {} bytes", bytes));
}

Status memset_device(void* d_dst, int value, size_t bytes, Stream s) {
  if (bytes == 0) return Status::ok();
  if (!d_dst) return Status::error("memset_device: null pointer");
  return cuda_status(cudaMemsetAsync(d_dst, value, bytes, cudaStream_t(s)), fmt::format("memset_device {} bytes", bytes));
}

// Also where asynchronous kernel faults surface (an illegal address in an earlier launch).
namespace {
__global__ void copy_words_kernel(uint32_t* dst, const uint32_t* src, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}
__global__ void copy_bytes_kernel(uint8_t* dst, const uint8_t* src, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}
}  // namespace

Status copy_by_kernel(void* d_dst, const void* src, size_t bytes, Stream s) {
  if (bytes == 0) return Status::ok();
  if (!d_dst || !src) return Status::error("copy_by_kernel: null pointer");
  constexpr int kThreads = 256;
  const bool words = bytes % 4 == 0 && reinterpret_cast<uintptr_t>(d_dst) % 4 == 0 &&
                     reinterpret_cast<uintptr_t>(src) % 4 == 0;
  const size_t n = words ? bytes / 4 : bytes;
  const unsigned blocks = unsigned(std::min<size_t>((n + kThreads - 1) / kThreads, 1024));
  if (words)
    copy_words_kernel<<<blocks, kThreads, 0, cudaStream_t(s)>>>(static_cast<uint32_t*>(d_dst),
                                                                 static_cast<const uint32_t*>(src), n);
  else
    copy_bytes_kernel<<<blocks, kThreads, 0, cudaStream_t(s)>>>(static_cast<uint8_t*>(d_dst),
                                                                static_cast<const uint8_t*>(src), n);
  return cuda_status(cudaGetLastError(), fmt::format("copy_by_kernel {} bytes", bytes));
}

Result<void*> mapped_device_pointer(void* pinned) {
  void* d = nullptr;
  const cudaError_t err = cudaHostGetDevicePointer(&d, pinned, 0);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return Status::error("mapped_device_pointer: {}", cudaGetErrorString(err));
  }
  return d;
}

Status synchronize(Stream s) { return cuda_status(cudaStreamSynchronize(cudaStream_t(s)), "synchronize"); }

Status launch_host_func(Stream s, void (*fn)(void*), void* arg) {
  return cuda_status(cudaLaunchHostFunc(cudaStream_t(s), fn, arg), "launch_host_func");
}

Result<Stream> stream_create() {
  cudaStream_t st = nullptr;
  const cudaError_t err = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  if (err != cudaSuccess) return cuda_status(err, "stream_create");
  return Stream(st);
}

void stream_destroy(Stream s) {
  if (s) cudaStreamDestroy(cudaStream_t(s));
}

Result<void*> pinned_alloc(size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return Status::error("pinned_alloc {} bytes: {}", bytes, cudaGetErrorString(err));
  }
  return p;
}

void pinned_free(void* p) {
  if (p) cudaFreeHost(p);
}

Result<Event> event_create() {
  cudaEvent_t e = nullptr;
  STRATA_TRY(cuda_status(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event_create"));
  return Event(e);
}

Result<Event> event_create_timed() {
  cudaEvent_t e = nullptr;
  STRATA_TRY(cuda_status(cudaEventCreate(&e), "event_create_timed"));
  return Event(e);
}

Result<float> event_elapsed_ms(Event from, Event to) {
  float ms = 0;
  STRATA_TRY(cuda_status(cudaEventElapsedTime(&ms, cudaEvent_t(from), cudaEvent_t(to)), "event_elapsed_ms"));
  return ms;
}

Status event_synchronize(Event e) { return cuda_status(cudaEventSynchronize(cudaEvent_t(e)), "event_synchronize"); }

Result<bool> event_done(Event e) {
  const cudaError_t err = cudaEventQuery(cudaEvent_t(e));
  if (err == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  STRATA_TRY(cuda_status(err, "event_done"));
  return true;
}

void event_destroy(Event e) {
  if (e) cudaEventDestroy(cudaEvent_t(e));
}

Status event_record(Event e, Stream s) {
  return cuda_status(cudaEventRecord(cudaEvent_t(e), cudaStream_t(s)), "event_record");
}

Status event_record_external(Event e, Stream s) {
  return cuda_status(cudaEventRecordWithFlags(cudaEvent_t(e), cudaStream_t(s), cudaEventRecordExternal),
                     "event_record_external");
}

Status stream_wait(Stream s, Event e) {
  return cuda_status(cudaStreamWaitEvent(cudaStream_t(s), cudaEvent_t(e), 0), "stream_wait");
}

Status capture_begin(Stream s) {
  return cuda_status(cudaStreamBeginCapture(cudaStream_t(s), cudaStreamCaptureModeThreadLocal), "capture_begin");
}

Result<Graph> capture_end(Stream s) {
  cudaGraph_t g = nullptr;
  STRATA_TRY(cuda_status(cudaStreamEndCapture(cudaStream_t(s), &g), "capture_end"));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, g, 0);
  cudaGraphDestroy(g);
  STRATA_TRY(cuda_status(err, "graph instantiate"));
  return Graph(exec);
}

Status graph_launch(Graph g, Stream s) {
  return cuda_status(cudaGraphLaunch(cudaGraphExec_t(g), cudaStream_t(s)), "graph_launch");
}

void graph_destroy(Graph g) {
  if (g) cudaGraphExecDestroy(cudaGraphExec_t(g));
}

Result<MemInfo> mem_info() {
  size_t free_b = 0, total_b = 0;
  STRATA_TRY(cuda_status(cudaMemGetInfo(&free_b, &total_b), "mem_info"));
  return MemInfo{free_b, total_b};
}

}  // namespace strata::kernels::cuda

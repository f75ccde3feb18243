// RMS norms (cuda_api.h rms_norm, rms_norm_add; act_round.h rms_norm_round). The sum of squares
// is accumulated in double (as the CPU does) and (x * inv) * w applied with non-contracted
// multiplies: results differ from the CPU only by the order of the double sum.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "kernels/cuda/act_round.cuh"
#include "kernels/cuda/act_round.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/matmul_internal.h"
#include "kernels/cuda/pdl_launch.cuh"

namespace strata::kernels::cuda {
namespace {

using detail::launch_status;

cudaStream_t as_stream(Stream s) { return static_cast<cudaStream_t>(s); }

constexpr int kNormThreads = 256;

// ---- rms_norm: one block per vector ----
// Decode normalises one 5376-wide vector at a time, so one block must finish it in about one
// memory round trip: float4 loads, unrolled so that a thread's loads are all in flight before the
// (double) sum needs them, and 1024 threads when there are few vectors (a 256-thread block with a
// load-then-add loop took ~16 us per vector: 21 dependent round trips).

// kAdd: out += the normalised vector (post-norm + residual add: the roundings of rms_norm into a
// buffer followed by add, in one kernel); out must not alias x then.
template <bool kVec4, bool kAdd = false>
__global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w, int64_t n, float eps,
                                float* out) {
  const float* xv = x + int64_t(blockIdx.x) * n;
  float* ov = out + int64_t(blockIdx.x) * n;
  double ss = 0;
  if constexpr (kVec4) {
    const float4* x4 = reinterpret_cast<const float4*>(xv);
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < n / 4; i += blockDim.x) {
      const float4 v = x4[i];
      ss += double(v.x) * double(v.x) + double(v.y) * double(v.y) + double(v.z) * double(v.z) +
            double(v.w) * double(v.w);
    }
  } else {
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += double(xv[i]) * double(xv[i]);
  }
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  __shared__ double warp_sums[32];
  __shared__ float inv_s;
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0;
    for (int i = 0; i < int(blockDim.x >> 5); ++i) t += warp_sums[i];
    inv_s = float(1.0 / sqrt(t / double(n) + double(eps)));
  }
  __syncthreads();
  const float inv = inv_s;
  // out may alias x: every read of x above happened before the barrier.
  if constexpr (kVec4) {
    const float4* x4 = reinterpret_cast<const float4*>(xv);
    const float4* w4 = reinterpret_cast<const float4*>(w);
    float4* o4 = reinterpret_cast<float4*>(ov);
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < n / 4; i += blockDim.x) {
      const float4 v = x4[i];
      float4 r = make_float4(__fmul_rn(v.x, inv), __fmul_rn(v.y, inv), __fmul_rn(v.z, inv), __fmul_rn(v.w, inv));
      if (w) {
        const float4 g = w4[i];
        r = make_float4(__fmul_rn(r.x, g.x), __fmul_rn(r.y, g.y), __fmul_rn(r.z, g.z), __fmul_rn(r.w, g.w));
      }
      if constexpr (kAdd) {
        const float4 o = o4[i];
        r = make_float4(__fadd_rn(o.x, r.x), __fadd_rn(o.y, r.y), __fadd_rn(o.z, r.z), __fadd_rn(o.w, r.w));
      }
      o4[i] = r;
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const float r = w ? __fmul_rn(__fmul_rn(xv[i], inv), w[i]) : __fmul_rn(xv[i], inv);
      ov[i] = kAdd ? __fadd_rn(ov[i], r) : r;
    }
  }
}

Status check_norm_args(const char* op, const float* d_x, const float* d_out, int64_t n_vec, int64_t n) {
  if (!d_x || !d_out) return Status::error("{}: null pointer", op);
  if (n_vec < 0 || n <= 0) return Status::error("{}: bad shape (n_vec {}, n {})", op, n_vec, n);
  if (n_vec > 0x7fffffff) return Status::error("{}: too many vectors ({})", op, n_vec);
  return Status::ok();
}

// 1024 threads for few wide vectors. Measured (H100, 27B Q3_K_M resident decode, two norms per
// layer of 5376): 140.3 tok/s at 1024 threads, 133.9 at 512, 123.3 at 256 -- the per-thread work
// after the reductions (the int8 rounding of each float4) is on the critical path.
// Few wide vectors (a decode or verify step's): the case the register kernel's 1024 threads and the
// cluster launch are for.
bool few_wide(int64_t n_vec, int64_t n) { return n_vec < 64 && n >= 4096; }
unsigned norm_threads(int64_t n_vec, int64_t n) { return few_wide(n_vec, n) ? 1024 : kNormThreads; }

template <bool kAdd>
Status launch_rms_norm(const char* op, const float* d_x, const float* d_w, int64_t n_vec, int64_t n, float eps,
                       float* d_out, Stream s) {
  STRATA_TRY(check_norm_args(op, d_x, d_out, n_vec, n));
  if (n_vec == 0) return Status::ok();
  const unsigned threads = norm_threads(n_vec, n);
  const bool vec4 = n % 4 == 0 && reinterpret_cast<uintptr_t>(d_x) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(d_out) % 16 == 0 && reinterpret_cast<uintptr_t>(d_w) % 16 == 0;
  if (vec4) rms_norm_kernel<true, kAdd><<<unsigned(n_vec), threads, 0, as_stream(s)>>>(d_x, d_w, n, eps, d_out);
  else rms_norm_kernel<false, kAdd><<<unsigned(n_vec), threads, 0, as_stream(s)>>>(d_x, d_w, n, eps, d_out);
  return launch_status(op);
}


// ---- the register kernel: one block (or cluster) per vector, each thread's float4s loaded once ----
// A decode step normalises one 5376-wide vector at a time; the kernel is latency-bound, so every
// load (x, w, and for rms_norm_add the residual) is issued before the reduction needs the first,
// and the second pass works from registers instead of reloading. kIt float4s per thread.

// The block's sum of ss (one term per thread), in every lane of warp 0 (0 elsewhere): lanes, then
// warps in order. Warp 0 reads the warps' sums before it returns; a caller that calls again
// must pass a barrier after this call first (both callers do).
__device__ __forceinline__ double block_sum_warp0(double ss) {
  __shared__ double warp_sums[32];
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = ss;
  __syncthreads();
  double t = 0.0;
  if (warp == 0) {
    t = lane < int(blockDim.x >> 5) ? warp_sums[lane] : 0.0;
    for (int off = 16; off > 0; off >>= 1) t += __shfl_xor_sync(0xffffffffu, t, off);
  }
  return t;
}

// 1 / sqrt(mean + eps) of the block's sum of squares (every thread gets it).
__device__ __forceinline__ float block_inv_rms(double ss, int64_t n, float eps) {
  __shared__ float inv_s;
  const double t = block_sum_warp0(ss);
  if (threadIdx.x == 0) inv_s = float(1.0 / sqrt(t / double(n) + double(eps)));
  __syncthreads();
  return inv_s;
}

// What the register kernel computes (out, x, h, w, post_w: rows of n floats):
enum class NormMode {
  norm,      // out = rms_norm(x) * w, rounded where r.q; out may alias x
  add,       // out += rms_norm(x) * w (rms_norm_add: x is the block output, out the residual)
  add_norm,  // x += rms_norm(h) * post_w (or x += h without post), then out = rms_norm(x) * w,
             // rounded where r.q; out may alias h
};

// ---- thread block clusters (sm_90): one vector over several SMs ----
// The register kernel's work after its reductions (each float4's scaling, residual add and int8
// rounding: five correctly rounded divisions per lane) is issue-bound on its one SM; at 1024 threads
// that is most of its ~7 us (H100: 512 threads cost 2.7 us more per call, 256 threads 7 us). With
// kCluster a vector's float4s are spread over the C blocks of a cluster (C = ceil(n / 4096) SMs),
// each block reduces its slice, the C partial sums are exchanged through distributed shared memory,
// and every block sums them in the same order (rank 0, 1, ...), so all get the same inv. Each block
// reads and writes only its own slice (out may alias x or h: no block reads another's). The double
// sums' order differs from one block's (as that differs between thread counts): results may differ
// from it in the last bit of inv, as they already may from the CPU's.
__device__ __forceinline__ void cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}
// This block's rank in its cluster and the cluster's block count.
struct ClusterPos {
  unsigned rank = 0, size = 1;
};
__device__ __forceinline__ ClusterPos cluster_pos() {
  ClusterPos c;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n\tmov.u32 %1, %%cluster_nctarank;\n" : "=r"(c.rank), "=r"(c.size));
#endif
  return c;
}
// The double at `local` (this block's shared memory) in block `rank` of the cluster.
__device__ __forceinline__ double cluster_load(const double* local, unsigned rank) {
  double v = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned a = unsigned(__cvta_generic_to_shared(local));
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.f64 %0, [%1];\n" : "=d"(v) : "r"(remote) : "memory");
#else
  (void)local, (void)rank;
#endif
  return v;
}

// 1 / sqrt(mean + eps) of a vector whose slices the cluster's blocks hold: this block's sum of
// squares ss (per thread) into part (this block's shared slot), then every block's, in rank order.
__device__ __forceinline__ float cluster_inv_rms(double ss, double* part, unsigned c, int64_t n, float eps) {
  const double b = block_sum_warp0(ss);
  if (threadIdx.x == 0) *part = b;
  cluster_arrive();  // part is written (release) ...
  cluster_wait();    // ... and every block's is (acquire)
  double t = 0;
  for (unsigned k = 0; k < c; ++k) t += cluster_load(part, k);
  return float(1.0 / sqrt(t / double(n) + double(eps)));
}

// kCluster: the vector's slices over a cluster's blocks (one float4 per thread), else one block.
template <int kIt, NormMode kMode, bool kCluster = false>
__global__ void __launch_bounds__(1024)
    rms_norm_regs_kernel(float* x, const float* __restrict__ w, int64_t n, float eps, float* out, const float* h,
                         bool post, const float* __restrict__ post_w, ActRounding r) {
  static_assert(!kCluster || kIt == 1, "a cluster's blocks hold consecutive slices of one float4 per thread");
  __shared__ double parts[2];  // kCluster: this block's partial sums, the post-norm's (h) and the norm's (x)
  detail::pdl_wait();                // where launched early (pdl_launch.cuh): x and h are the kernel before's
  detail::pdl_launch_dependents();  // the GEMV after it may start loading weights
  const ClusterPos cp = kCluster ? cluster_pos() : ClusterPos{};
  const int64_t n4 = n / 4, row = int64_t(blockIdx.x / cp.size) * n;
  const int64_t first = int64_t(cp.rank) * blockDim.x + threadIdx.x;  // this thread's first float4
  auto inv_rms = [&](double ss, int slot) {
    if constexpr (kCluster) return cluster_inv_rms(ss, &parts[slot], cp.size, n, eps);
    else return block_inv_rms(ss, n, eps);
  };
  float4* x4 = reinterpret_cast<float4*>(x + row);
  const float4* w4 = reinterpret_cast<const float4*>(w);
  float4* o4 = reinterpret_cast<float4*>(out + row);
  const float4* h4 = reinterpret_cast<const float4*>(h + row);
  const float4* p4 = reinterpret_cast<const float4*>(post_w);
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
  // Every load first: the reductions below wait on them once.
  float4 xv[kIt], wv[kIt], ov[kIt], hv[kIt], pv[kIt];
#pragma unroll
  for (int k = 0; k < kIt; ++k) {
    const int64_t i = first + int64_t(k) * blockDim.x;
    const bool in = i < n4;
    xv[k] = in ? x4[i] : zero;
    wv[k] = in && w ? w4[i] : zero;
    if constexpr (kMode == NormMode::add) ov[k] = in ? o4[i] : zero;
    if constexpr (kMode == NormMode::add_norm) {
      hv[k] = in ? h4[i] : zero;
      pv[k] = in && post_w ? p4[i] : zero;
    }
  }
  if constexpr (kMode == NormMode::add_norm) {
    // rms_norm_add's (or add's) arithmetic on the block output, into the residual stream.
    if (post) {
      double sh = 0;
#pragma unroll
      for (int k = 0; k < kIt; ++k) {
        const float4 v = hv[k];
        sh += double(v.x) * double(v.x) + double(v.y) * double(v.y) + double(v.z) * double(v.z) +
              double(v.w) * double(v.w);
      }
      const float inv_h = inv_rms(sh, 0);
#pragma unroll
      for (int k = 0; k < kIt; ++k) {
        const float4 v = hv[k];
        float4 o = make_float4(__fmul_rn(v.x, inv_h), __fmul_rn(v.y, inv_h), __fmul_rn(v.z, inv_h), __fmul_rn(v.w, inv_h));
        if (post_w) {
          const float4 g = pv[k];
          o = make_float4(__fmul_rn(o.x, g.x), __fmul_rn(o.y, g.y), __fmul_rn(o.z, g.z), __fmul_rn(o.w, g.w));
        }
        hv[k] = o;
      }
    }
#pragma unroll
    for (int k = 0; k < kIt; ++k) {
      const int64_t i = first + int64_t(k) * blockDim.x;
      const float4 a = xv[k], o = hv[k];
      xv[k] = make_float4(__fadd_rn(a.x, o.x), __fadd_rn(a.y, o.y), __fadd_rn(a.z, o.z), __fadd_rn(a.w, o.w));
      if (i < n4) x4[i] = xv[k];
    }
  }
  double ss = 0;
#pragma unroll
  for (int k = 0; k < kIt; ++k) {
    const float4 v = xv[k];
    ss += double(v.x) * double(v.x) + double(v.y) * double(v.y) + double(v.z) * double(v.z) + double(v.w) * double(v.w);
  }
  const float inv = inv_rms(ss, 1);
  if constexpr (kCluster) cluster_arrive();  // done reading the others' parts (waits below before exiting)
#pragma unroll
  for (int k = 0; k < kIt; ++k) {
    const int64_t i = first + int64_t(k) * blockDim.x;
    const float4 v = xv[k];
    float4 o = make_float4(__fmul_rn(v.x, inv), __fmul_rn(v.y, inv), __fmul_rn(v.z, inv), __fmul_rn(v.w, inv));
    if (w) {
      const float4 g = wv[k];
      o = make_float4(__fmul_rn(o.x, g.x), __fmul_rn(o.y, g.y), __fmul_rn(o.z, g.z), __fmul_rn(o.w, g.w));
    }
    if constexpr (kMode == NormMode::add) {
      const float4 a = ov[k];
      o = make_float4(__fadd_rn(a.x, o.x), __fadd_rn(a.y, o.y), __fadd_rn(a.z, o.z), __fadd_rn(a.w, o.w));
    }
    if (i < n4) o4[i] = o;
    if constexpr (kMode != NormMode::add) {
      if (r.q) detail::round_store4(i < n4 ? o : zero, row + 4 * i, i < n4, r);
    }
  }
  if constexpr (kCluster) cluster_wait();  // no block exits while another may still read its parts
}

// The cluster launch where it applies (sm_90, STRATA_NORM_CLUSTER=1, few wide vectors of 2 to 8
// blocks of at most 1024 threads each): true if launched. Opt-in because it lost: H100, session 31,
// its bit-for-bit tests and the forward and graph suites pass with it on, but the 27B q3_K_M
// resident decode A/B (tools/device/decode_ab.sh, -c 4096 -p 512 -n 64 -r 2) gave 138.2 / 136.7
// tok/s against 141.5 / 141.7 for the one-block kernel (-3%): the cluster launch and its two
// barrier round trips cost more than the per-thread work it spreads.
template <NormMode kMode>
bool launch_norm_cluster(float* d_x, const float* d_w, int64_t n_vec, int64_t n, float eps, float* d_out,
                         const ActRounding& r, cudaStream_t s, const float* d_h, bool post, const float* d_post_w) {
  static const bool on = [] {
    const char* e = std::getenv("STRATA_NORM_CLUSTER");  // opt-in: it lost (above)
    if (!(e && e[0] == '1')) return false;
    int dev = 0, major = 0;
    return cudaGetDevice(&dev) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9;
  }();
  const int64_t n4 = n / 4;
  const unsigned c = unsigned((n4 + 1023) / 1024);
  if (!on || !few_wide(n_vec, n) || c < 2 || c > 8 || n_vec * c > 0x7fffffff) return false;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(n_vec) * c);
  cfg.blockDim = dim3(unsigned((n4 + c - 1) / c + 31) / 32 * 32);
  cfg.stream = s;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = c;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = detail::small_kernel_pdl() ? 2 : 1;
  if (cudaLaunchKernelEx(&cfg, rms_norm_regs_kernel<1, kMode, true>, d_x, d_w, n, eps, d_out, d_h, post, d_post_w,
                         r) == cudaSuccess)
    return true;
  (void)cudaGetLastError();  // a cluster the device cannot place: one block per vector instead
  return false;
}

// Launches the register kernel where the vectors fit (float4-aligned, at most 8 float4s per thread
// (4 at 1024 threads), n % 32 == 0), over a cluster where launch_norm_cluster takes it; false
// otherwise (the caller runs the plain kernels).
template <NormMode kMode>
bool launch_norm_regs(float* d_x, const float* d_w, int64_t n_vec, int64_t n, float eps, float* d_out,
                      const ActRounding& r, cudaStream_t s, const float* d_h = nullptr, bool post = false,
                      const float* d_post_w = nullptr) {
  const auto a16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (n % 32 != 0 || !a16(d_x) || !a16(d_out) || !a16(d_w) || !a16(d_h) || !a16(d_post_w)) return false;
  if (launch_norm_cluster<kMode>(d_x, d_w, n_vec, n, eps, d_out, r, s, d_h, post, d_post_w)) return true;
  const unsigned threads = norm_threads(n_vec, n);
  const int64_t per = (n / 4 + threads - 1) / threads;
  const auto run = [&](auto kernel) {
    detail::launch_pdl(detail::small_kernel_pdl(), kernel, dim3(unsigned(n_vec)), dim3(threads), 0, s, d_x, d_w, n,
                       eps, d_out, d_h, post, d_post_w, r);
    return true;
  };
  if (per <= 1) return run(rms_norm_regs_kernel<1, kMode>);
  if (per <= 2) return run(rms_norm_regs_kernel<2, kMode>);
  if (per <= 4) return run(rms_norm_regs_kernel<4, kMode>);
  if (per <= 8 && threads <= 256) return run(rms_norm_regs_kernel<8, kMode>);
  return false;
}

}  // namespace

Status rms_norm(const float* d_x, const float* d_w, int64_t n_vec, int64_t n, float eps, float* d_out, Stream s) {
  return rms_norm_round(d_x, d_w, n_vec, n, eps, d_out, ActRounding{}, s);
}

Status rms_norm_add(const float* d_h, const float* d_w, int64_t n_vec, int64_t n, float eps, float* d_x, Stream s) {
  if (d_h && d_h == d_x) return Status::error("rms_norm_add: the sum must not alias the normalised input");
  STRATA_TRY(check_norm_args("rms_norm_add", d_h, d_x, n_vec, n));
  if (n_vec == 0) return Status::ok();
  if (launch_norm_regs<NormMode::add>(const_cast<float*>(d_h), d_w, n_vec, n, eps, d_x, ActRounding{}, as_stream(s)))
    return launch_status("rms_norm_add");
  return launch_rms_norm<true>("rms_norm_add", d_h, d_w, n_vec, n, eps, d_x, s);
}


Status rms_norm_round(const float* d_x, const float* d_w, int64_t n_vec, int64_t n, float eps, float* d_out,
                      const ActRounding& r, Stream s) {
  STRATA_TRY(check_norm_args("rms_norm", d_x, d_out, n_vec, n));
  if (n_vec == 0) return Status::ok();
  if (launch_norm_regs<NormMode::norm>(const_cast<float*>(d_x), d_w, n_vec, n, eps, d_out, r, as_stream(s)))
    return launch_status("rms_norm");
  STRATA_TRY(launch_rms_norm<false>("rms_norm", d_x, d_w, n_vec, n, eps, d_out, s));
  return r.q ? round_act(d_out, n_vec * n, r, s) : Status::ok();
}

Status add_rms_norm_round(float* d_x, const float* d_h, bool post, const float* d_post_w, const float* d_w,
                          int64_t n_vec, int64_t n, float eps, float* d_out, const ActRounding& r, Stream s) {
  STRATA_TRY(check_norm_args("add_rms_norm", d_h, d_x, n_vec, n));
  if (!d_out || d_out == d_x) return Status::error("add_rms_norm: the output must be set and not alias the residual");
  if (n_vec == 0) return Status::ok();
  if (launch_norm_regs<NormMode::add_norm>(d_x, d_w, n_vec, n, eps, d_out, r, as_stream(s), d_h, post, d_post_w))
    return launch_status("add_rms_norm");
  STRATA_TRY(post ? rms_norm_add(d_h, d_post_w, n_vec, n, eps, d_x, s) : add(d_x, d_h, n_vec * n, s));
  return rms_norm_round(d_x, d_w, n_vec, n, eps, d_out, r, s);
}
}  // namespace strata::kernels::cuda

// strata bench cpu-kernels: the CPU matmul for decode / verify (1..16 columns) on a 27B shape and
// a small one, f32-activation kernels (the exact reference, matmul_dot) against the int8-activation
// kernels (gemv_q8.h), as GB/s of weight bytes over the host read ceiling measured in the same run
// with the same thread count. Each shape is replicated into enough distinct buffers to cover
// --cover bytes (default 1 GiB: beyond the last-level cache of the machines we run on), and a timed
// pass walks all of them, so the figures are DRAM, not cache. The int8 times include quantising
// the activations (once per matmul, as the engine does).
// Then the CPU decode attention (kernels/cpu/attention.h: the CPU engine's, and the CUDA engine's
// host-KV attention) on the 27B's global-layer shape (32 query heads, 16 KV heads of 128) for each
// --attention KV type, --ctx keys and --queries count: ms per call and GB/s of KV bytes (each key's
// K and V slices read once per call) over the same host read ceiling.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <tbb/task_arena.h>

#include "cli/bench_compare.h"
#include "cli/bench_kernels.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/half.h"
#include "core/units.h"
#include "kv/kv_quant.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/dot_q8.h"
#include "kernels/cpu/gemv_q8.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/memory_bandwidth.h"
#include "kernels/cpu/quant_kernels.h"

namespace strata::cli {
namespace {

namespace kc = kernels::cpu;

// The types whose int8 kernels pick a grid load per CPU at first use (dot_q8.h iq3_grid_pick).
bool has_grid_pick(GgmlType t) { return t == GgmlType::IQ3_XXS || t == GgmlType::IQ3_S; }

struct BenchCpuKernelsArgs {
  std::string types = "q2_K,q3_K,q4_K,q5_K,q6_K,iq3_xxs,iq3_s,iq4_xs,q8_0,q4_0,q4_1,q5_0,q5_1,iq4_nl,iq2_xxs,iq2_xs,iq2_s,iq1_s,iq1_m";
  std::string cols = "1,2,4,8,16";
  std::string threads;  // default: 1, 2, 4, ... and all
  uint64_t cover = kGiB;
  int iters = 3;
  bool quick = false;  // the 27B shape only, q4_K and q8_0, 256 MiB cover; attention at 4096 keys
  std::string attention = "f32,f16,q8,q4";  // KV types of the attention rows ("none": skip them)
  int64_t ctx = 32768;
  std::string queries = "1,8";
  std::string json_out;
  BenchCompare compare;
};

struct Shape {
  const char* name;
  int64_t n_in, n_out;
};
// The 1b shape: gemma3-1b's FFN (1152 wide, not a multiple of 256, so its files carry blocks of 32
// there: q5_0 / q8_0 in a Q4_K_M mix), whose rows end in a partial 256-element chunk; the types of
// 256-element blocks skip it.
constexpr Shape kShapes[] = {
    {"27B ffn_up 5376x21504", 5376, 21504}, {"small 2048x8192", 2048, 8192}, {"1b ffn_up 1152x6912", 1152, 6912}};

std::vector<int> parse_ints(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');) out.push_back(std::stoi(t));
  return out;
}

template <typename F>
double best_seconds(int iters, F&& f) {
  double best = 1e30;
  for (int i = 0; i < iters + 1; ++i) {  // the first pass warms up (page faults, arena start)
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0 || iters == 0) best = std::min(best, s);
  }
  return best;
}

nlohmann::json bench_shape(GgmlType type, const Shape& sh, int threads, double read_gb_s,
                           const std::vector<int>& cols, const BenchCpuKernelsArgs& a, uint64_t cover) {
  const auto* k = kc::quant_kernels(type);
  const uint64_t row_bytes = ggml_row_bytes(type, uint64_t(sh.n_in));
  const uint64_t bytes = row_bytes * uint64_t(sh.n_out);
  const int copies = int(std::max<uint64_t>(1, (cover + bytes - 1) / bytes));
  std::vector<uint8_t> mem(bytes * uint64_t(copies));
  Rng rng(11);
  k->fill_random(mem.data(), sh.n_in * sh.n_out, rng, 0.02f);
  for (int c = 1; c < copies; ++c) std::memcpy(mem.data() + c * bytes, mem.data(), bytes);
  std::vector<kernels::WeightView> views;
  for (int c = 0; c < copies; ++c) views.push_back({mem.data() + c * bytes, type, sh.n_in, sh.n_out, row_bytes});
  const int max_cols = *std::max_element(cols.begin(), cols.end());
  std::vector<float> x(size_t(max_cols) * size_t(sh.n_in)), y(size_t(max_cols) * size_t(sh.n_out));
  for (auto& v : x) v = rng.normal();

  const std::string tname(ggml_type_info(type).name);
  nlohmann::json j = {{"config", fmt::format("{} {} t{}", tname, sh.name, threads)},
                      {"type", tname}, {"shape", sh.name}, {"n_in", sh.n_in}, {"n_out", sh.n_out},
                      {"threads", threads}, {"weight_bytes", bytes}, {"buffers", copies},
                      {"host_read_gb_s", read_gb_s},
                      {"q8_isa", kc::q8_isa_name(kc::best_dot_q8_isa(type))}};
  if (has_grid_pick(type)) j["iq3_grid"] = kc::grid_load_name(kc::iq3_grid_load(type));
  auto pass_gb_s = [&](double seconds) { return double(bytes) * copies / seconds / 1e9; };
  const double t_old = best_seconds(a.iters, [&] {
    for (const auto& v : views) kc::matmul_dot(v, x.data(), 1, y.data());
  });
  j["f32act_cols1_gb_s"] = pass_gb_s(t_old);
  j["f32act_cols1_fraction_of_read"] = pass_gb_s(t_old) / read_gb_s;
  double t1 = 0;
  for (int c : cols) {
    const double t = best_seconds(a.iters, [&] {
      for (const auto& v : views) kc::matmul_q8(v, x.data(), c, y.data());
    });
    j[fmt::format("q8_cols{}_gb_s", c)] = pass_gb_s(t);
    j[fmt::format("q8_cols{}_fraction_of_read", c)] = pass_gb_s(t) / read_gb_s;
    if (c == 1) t1 = t;
    if (t1 > 0 && c != 1) j[fmt::format("q8_cols{}_time_over_cols1", c)] = t / t1;
  }
  return j;
}

// One decode attention call of n_q queries (positions ctx - n_q .. ctx - 1) over a store of ctx
// keys of one KV type, 27B global-layer heads.
nlohmann::json bench_attention(GgmlType kv, int64_t ctx, int n_q, int threads, double read_gb_s, int iters) {
  constexpr int64_t kHeads = 32, kHeadsKv = 16, kHeadDim = 128;
  const uint64_t row = ggml_row_bytes(kv, uint64_t(kHeadsKv * kHeadDim));
  std::vector<uint8_t> k(row * uint64_t(ctx)), v(k.size());
  Rng rng(13);
  for (auto* buf : {&k, &v}) {
    if (kv == GgmlType::F32) {
      auto* f = reinterpret_cast<float*>(buf->data());
      for (size_t i = 0; i < buf->size() / 4; ++i) f[i] = rng.normal() * 0.5f;
    } else if (kv == GgmlType::F16) {
      auto* h = reinterpret_cast<uint16_t*>(buf->data());
      for (size_t i = 0; i < buf->size() / 2; ++i) h[i] = f32_to_f16(rng.normal() * 0.5f);
    } else {
      kc::quant_kernels(kv)->fill_random(buf->data(), kHeadsKv * kHeadDim * ctx, rng, 0.5f);
    }
  }
  std::vector<float> q(size_t(n_q * kHeads * kHeadDim)), out(q.size());
  for (auto& x : q) x = rng.normal();
  std::vector<int32_t> pos(static_cast<size_t>(n_q));
  for (int i = 0; i < n_q; ++i) pos[size_t(i)] = int32_t(ctx - n_q + i);
  const kc::KvStore store{k.data(), v.data(), kv, kv, ctx};
  const kc::AttentionShape shape{kHeads, kHeadsKv, kHeadDim, 0, 0.0883883f, 0};
  const double t = best_seconds(iters, [&] { kc::attention(q.data(), pos.data(), n_q, store, shape, out.data()); });
  const double gb_s = 2.0 * double(row) * double(ctx) / t / 1e9;
  const std::string kname(kv::kv_type_name(kv));
  return {{"config", fmt::format("attention {} ctx{} q{} t{}", kname, ctx, n_q, threads)},
          {"kv", kname}, {"keys", ctx}, {"queries", n_q}, {"threads", threads}, {"ms", t * 1e3},
          {"kv_gb_s", gb_s}, {"fraction_of_read", gb_s / read_gb_s}};
}

int run(BenchCpuKernelsArgs& a) {
  if (Status s = a.compare.load("cpu-kernels"); !s) {
    log::error("{}", s.message());
    return 2;
  }
  if (a.quick) {
    a.types = "q4_K,q8_0";
    a.cover = std::min<uint64_t>(a.cover, 256ull << 20);
  }
  std::vector<GgmlType> types;
  std::stringstream ss(a.types);
  for (std::string t; std::getline(ss, t, ',');) {
    auto ty = ggml_type_from_name(t);
    if (!ty || !kc::has_dot_q8(*ty)) {
      log::error("--types: '{}' is not a type with int8-activation kernels", t);
      return 2;
    }
    types.push_back(*ty);
  }
  std::vector<GgmlType> kv_types;
  if (a.attention != "none") {
    std::stringstream ks(a.attention);
    for (std::string t; std::getline(ks, t, ',');) {
      const auto kt = kv::kv_type_from_name(t);
      if (!kt) {
        log::error("--attention: '{}' is not f32, f16, q8 or q4 (or none)", t);
        return 2;
      }
      kv_types.push_back(*kt);
    }
  }
  if (a.quick) a.ctx = std::min<int64_t>(a.ctx, 4096);
  std::vector<int> cols, threads, queries;
  try {
    cols = parse_ints(a.cols);
    if (!a.threads.empty()) threads = parse_ints(a.threads);
    queries = parse_ints(a.queries);
  } catch (const std::exception&) {
    log::error("--cols / --threads / --queries: comma-separated integers expected");
    return 2;
  }
  if (queries.empty() || std::any_of(queries.begin(), queries.end(), [](int q) { return q < 1 || q > 64; })) {
    log::error("--queries: counts in 1..64 expected");
    return 2;
  }
  if (a.ctx < 64 || a.ctx > (int64_t(1) << 20)) {
    log::error("--ctx: 64 .. 1048576 keys expected, got {}", a.ctx);
    return 2;
  }
  if (cols.empty() || std::any_of(cols.begin(), cols.end(), [](int c) { return c < 1 || c > 64; })) {
    log::error("--cols: counts in 1..64 expected");
    return 2;
  }
  const int all = int(std::max(1u, std::thread::hardware_concurrency()));
  if (threads.empty()) {
    for (int t = 1; t < all; t *= 2) threads.push_back(t);
    threads.push_back(all);
  }
  nlohmann::json rows = nlohmann::json::array(), att_rows = nlohmann::json::array(), ceilings = nlohmann::json::object();
  // The IQ3 kernels' grid load (dot_q8.h): which one this run uses, and why.
  for (GgmlType ty : types) {
    if (!has_grid_pick(ty)) continue;
    const kc::GridLoadPick p = kc::iq3_grid_pick(ty);
    const std::string why = p.from_env ? std::string("STRATA_IQ3_GRID")
                            : p.gather_ns > 0 ? fmt::format("measured: gather {:.1f}, direct {:.1f} ns per super-block row", p.gather_ns, p.direct_ns)
                                              : std::string("no choice in this build");
    fmt::print("{} grid loads: {} ({})\n", ggml_type_info(ty).name, kc::grid_load_name(p.load), why);
  }
  fmt::print("{:<6} {:<22} {:>3} {:>9} {:>12}", "type", "shape", "thr", "read GB/s", "f32 x c1");
  for (int c : cols) fmt::print(" {:>12}", fmt::format("int8 c{}", c));
  fmt::print("   (GB/s of weights, % of read)\n");
  for (int t : threads) {
    if (t < 1) {
      log::error("--threads: counts >= 1 expected");
      return 2;
    }
    tbb::task_arena arena(t);
    arena.execute([&] {
      const double read = kc::measure_read_bandwidth(std::max<uint64_t>(a.cover, 512ull << 20), 3);
      ceilings[fmt::format("host_read_gb_s_t{}", t)] = read;
      for (GgmlType ty : types)
        for (const auto& sh : kShapes) {
          if (a.quick && &sh != &kShapes[0]) continue;
          if (sh.n_in % int64_t(ggml_type_info(ty).block_size) != 0) continue;
          auto r = bench_shape(ty, sh, t, read, cols, a, a.cover);
          fmt::print("{:<6} {:<22} {:>3} {:>9.1f} {:>6.1f} {:>4.0f}%", r["type"].get<std::string>(), sh.name, t, read,
                     r["f32act_cols1_gb_s"].get<double>(), 100 * r["f32act_cols1_fraction_of_read"].get<double>());
          for (int c : cols)
            fmt::print(" {:>6.1f} {:>4.0f}%", r[fmt::format("q8_cols{}_gb_s", c)].get<double>(),
                       100 * r[fmt::format("q8_cols{}_fraction_of_read", c)].get<double>());
          fmt::print("\n");
          rows.push_back(std::move(r));
        }
      for (GgmlType kv : kv_types)
        for (int nq : queries) {
          auto r = bench_attention(kv, a.ctx, nq, t, read, a.iters);
          fmt::print("attention {:<4} {:>7} keys {:>2} queries {:>3} thr: {:>8.2f} ms {:>6.1f} GB/s of KV {:>4.0f}% of read\n",
                     r["kv"].get<std::string>(), a.ctx, nq, t, r["ms"].get<double>(), r["kv_gb_s"].get<double>(),
                     100 * r["fraction_of_read"].get<double>());
          att_rows.push_back(std::move(r));
        }
    });
  }
  nlohmann::json j = {{"bench", "cpu-kernels"}, {"device", "cpu"}, {"hardware_threads", all},
                      {"cover_bytes", a.cover}, {"ceilings", ceilings}, {"matmul", rows}, {"attention", att_rows}};
  return finish_bench(j, a.json_out, a.compare);
}

}  // namespace

std::function<int()> add_bench_cpu_kernels(CLI::App* bench) {
  auto a = std::make_shared<BenchCpuKernelsArgs>();
  auto* sub = bench->add_subcommand("cpu-kernels", "CPU matmul for 1..16 columns (f32- vs int8-activation "
                                                   "kernels) and decode attention per KV type, GB/s vs the host read ceiling of the same run");
  sub->add_option("--types", a->types, "Weight types, comma-separated")->capture_default_str();
  sub->add_option("--cols", a->cols, "Activation column counts, comma-separated")->capture_default_str();
  sub->add_option("--threads", a->threads, "Thread counts, comma-separated (default 1, 2, 4, ... and all)");
  sub->add_option("--cover", a->cover, "Bytes of distinct weight buffers each pass walks (beyond the LLC)")
      ->capture_default_str();
  sub->add_option("--iters", a->iters, "Timed passes (the best counts)")->capture_default_str()->check(CLI::Range(1, 100));
  sub->add_flag("--quick", a->quick, "q4_K and q8_0 on the 27B shape, 256 MiB cover, attention at 4096 keys (smoke run)");
  sub->add_option("--attention", a->attention,
                  "KV types of the decode attention rows (27B global-layer heads), comma-separated, or none")
      ->capture_default_str();
  sub->add_option("--ctx", a->ctx, "Keys each attention call attends")->capture_default_str();
  sub->add_option("--queries", a->queries, "Queries per attention call (1: a decode step; more: a verify pass)")
      ->capture_default_str();
  sub->add_option("--json", a->json_out, "Write the results as JSON to this file");
  a->compare.add_to(sub);
  return [a, sub]() -> int { return sub->parsed() ? run(*a) : -1; };
}

}  // namespace strata::cli

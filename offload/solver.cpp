// The solvers behind plan() (method documented in planner.h) and the infeasibility diagnosis.
#include <algorithm>
#include <cmath>
#include <optional>
#include <functional>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "core/units.h"
#include "offload/planner.h"

namespace strata::offload {
namespace {

// The decision units in a fixed order: head, then per layer attention, FFN.
struct Unit {
  const WeightBlock* block;
  bool draft;  // on the draft path
};

std::vector<Unit> units(const ModelBlocks& m, const RunShape& r) {
  std::vector<Unit> u;
  const bool spec = r.speculative();
  u.push_back({&m.head, spec});
  for (uint32_t il = 0; il < m.n_layer; ++il) {
    const bool d = spec && il < r.draft_depth;
    u.push_back({&m.attention[il], d});
    u.push_back({&m.ffn[il], d});
  }
  return u;
}

Tier& tier_of(Placement& pl, size_t i) {
  if (i == 0) return pl.head;
  return (i - 1) % 2 == 0 ? pl.attention[(i - 1) / 2] : pl.ffn[(i - 1) / 2];
}

Placement empty_placement(const ModelBlocks& m, bool gpu) {
  Placement pl;
  pl.attention.assign(m.n_layer, gpu ? Tier::gpu : Tier::cpu);
  pl.ffn.assign(m.n_layer, gpu ? Tier::gpu : Tier::cpu);
  pl.head = gpu ? Tier::gpu : Tier::cpu;
  pl.kv.assign(m.n_layer, gpu ? KvTier::gpu : KvTier::host);
  return pl;
}

// Keeps the best plan, and separately the best with the draft path resident. The result is the
// draft-resident one when it is as fast as the best (relative 1e-12: sums in a different order), or
// whenever it exists if the run requires it (planner.h, "Draft path").
struct Best {
  explicit Best(const RunShape& r) : require_draft(r.require_draft_resident) {}
  bool require_draft;
  std::optional<Plan> any, draft;
  void offer(const Plan& p) {
    const double t = p.prediction.objective_tps();
    if (!any || t > any->prediction.objective_tps()) any = p;
    if (p.draft_resident && (!draft || t > draft->prediction.objective_tps())) draft = p;
  }
  Result<Plan> result(const char* solver) {
    const bool take_draft =
        draft && (require_draft || draft->prediction.objective_tps() >= any->prediction.objective_tps() * (1 - 1e-12));
    std::optional<Plan>& b = take_draft ? draft : any;
    if (!b) return Status::error("infeasible");
    b->solver = solver;
    return *b;
  }
};

}  // namespace

bool draft_path_resident(const ModelBlocks& m, const RunShape& r, const Placement& pl) {
  if (!r.speculative()) return false;
  if (pl.head != Tier::gpu) return false;
  for (uint32_t il = 0; il < std::min(r.draft_depth, m.n_layer); ++il)
    if (pl.attention[il] != Tier::gpu || pl.ffn[il] != Tier::gpu) return false;
  return true;
}

// Chunks of the group the run asks to reserve (RunShape::prefill_group_reserve), within
// [1, kMaxPrefillGroup] and the prompt's chunks.
static uint32_t reserve_chunks(const RunShape& r) {
  return uint32_t(std::clamp<uint64_t>(std::min<uint64_t>(r.prefill_group_reserve, kMaxPrefillGroup), 1,
                                        std::max<uint64_t>(1, prefill_chunks(r))));
}

// The group a placement reserves before its weights, in chunks (1: none).
static uint32_t reserved_group(const RunShape& r, const Placement& pl) {
  return layer_major_prefill(pl) ? reserve_chunks(r) : 1;
}

// Plan::prefill_group: the reserved group grown into the VRAM left beside everything else the
// plan holds (the usage already counts the reserved part and fits the budget).
static void choose_prefill_group(const ModelBlocks& m, const Budgets& b, const RunShape& r, Plan& plan) {
  if (!layer_major_prefill(plan.placement)) return;
  const uint64_t others = plan.usage.vram_total() - plan.usage.vram_prefill_group;
  uint32_t g = uint32_t(std::min<uint64_t>(kMaxPrefillGroup, prefill_chunks(r)));
  while (g > plan.prefill_group && others + prefill_group_bytes(m, r, g) > b.vram) --g;
  plan.prefill_group = g;
  plan.usage.vram_prefill_group = prefill_group_bytes(m, r, g);
}

// The bytes of the units (units()' order: the head, then attention and FFN per layer) for which
// streams(i) holds, in the order a decode step streams them: the layers, then the head. The ring's
// schedule (cpu-tier blocks cross it only in prefill chunks).
template <typename Streams>
std::vector<uint64_t> stream_order(const ModelBlocks& m, Streams streams) {
  std::vector<uint64_t> order;
  for (uint32_t il = 0; il < m.n_layer; ++il) {
    if (streams(1 + 2 * size_t(il))) order.push_back(m.attention[il].bytes);
    if (streams(2 + 2 * size_t(il))) order.push_back(m.ffn[il].bytes);
  }
  if (streams(0)) order.push_back(m.head.bytes);
  return order;
}

bool evaluate(const ModelBlocks& m, const HardwareProfile& p, const Budgets& b, const RunShape& r, Plan& plan) {
  const Placement& pl = plan.placement;
  const bool gpu = p.has_gpu() && b.vram > 0;
  Usage u;
  uint64_t max_nonres = 0, max_bounce = 0;
  auto add = [&](const WeightBlock& w, Tier t) {
    switch (t) {
      case Tier::gpu: u.vram_weights += w.bytes; break;
      case Tier::stream: u.pinned_weights += w.bytes; break;
      case Tier::disk: u.disk += w.bytes; max_bounce = std::max(max_bounce, w.bytes); break;
      case Tier::cpu: u.host_cpu_weights += w.bytes; max_bounce = std::max(max_bounce, w.bytes); break;
    }
    if (t != Tier::gpu) max_nonres = std::max(max_nonres, w.bytes);
    if ((t == Tier::disk && !b.allow_disk) || (t == Tier::cpu && !b.allow_cpu)) return false;
    return gpu || t == Tier::cpu;
  };
  bool ok = add(m.head, pl.head);
  for (uint32_t il = 0; il < m.n_layer; ++il) {
    ok = add(m.attention[il], pl.attention[il]) && ok;
    ok = add(m.ffn[il], pl.ffn[il]) && ok;
    const uint64_t kv = m.kv_layer_bytes(il, r.ctx, r.kv, r.kv_v_dtype(), r.ring_margin());
    if (pl.kv[il] == KvTier::gpu) {
      if (!gpu) ok = false;
      u.vram_kv += kv;
    } else {
      if (!b.allow_host_kv) ok = false;
      u.host_kv += kv;
    }
  }
  plan.prefetch_depth = prefetch_depth_for(r.prefetch_depth, u.disk > 0);
  plan.ring_slot_bytes = gpu ? max_nonres : 0;
  plan.ring_slots = (gpu && max_nonres > 0) ? plan.prefetch_depth + 1 : 0;
  plan.ring_shared = false;
  if (gpu) {
    u.vram_staging = plan.ring_slot_bytes * plan.ring_slots;
    if (r.shared_ring && plan.ring_slots == 2 && u.disk == 0) {  // the executor's condition (weight_store.h)
      const auto streamed = [&](size_t i) {
        const Tier t = tier_of(plan.placement, i);
        return t == Tier::stream || t == Tier::disk;
      };
      const uint64_t shared = std::max(max_nonres, shared_ring_bytes(stream_order(m, streamed)));
      if (shared < u.vram_staging) plan.ring_shared = true, u.vram_staging = shared;
    }
    u.vram_scratch = scratch_bytes(m, r);
    u.vram_context = p.cuda_context.bytes;
    // Disk reads land in pinned staging; CPU-tier blocks cross through it for prefill.
    u.pinned_staging = max_bounce * (plan.prefetch_depth + 1);
  }
  plan.prefill_group = gpu ? reserved_group(r, pl) : 1;
  u.vram_prefill_group = prefill_group_bytes(m, r, plan.prefill_group);
  plan.usage = u;
  if (!ok) return false;
  if (gpu && u.vram_total() > b.vram) return false;
  if (u.pinned_total() > b.pinned || u.host_total() > b.host || u.disk > b.disk) return false;
  if (gpu) choose_prefill_group(m, b, r, plan);
  plan.prediction = predict(m, p, pl, r, plan.prefill_group);
  plan.draft_resident = draft_path_resident(m, r, pl);
  return true;
}

Result<Plan> solve_exhaustive(const ModelBlocks& m, const HardwareProfile& p, const Budgets& b, const RunShape& r) {
  const bool gpu = p.has_gpu() && b.vram > 0;
  const auto us = units(m, r);
  const auto full = m.full_layers();
  const int n_tiers = gpu ? 4 : 1;
  uint64_t combos = 1;
  for (size_t i = 0; i < us.size(); ++i) combos *= n_tiers;
  const uint64_t kv_combos = gpu ? (1ull << full.size()) : 1;
  Best best(r);
  Plan plan;
  plan.placement = empty_placement(m, gpu);
  for (uint64_t kc = 0; kc < kv_combos; ++kc) {
    for (size_t j = 0; j < full.size(); ++j)
      plan.placement.kv[full[j]] = gpu && !((kc >> j) & 1) ? KvTier::gpu : KvTier::host;
    for (uint64_t c = 0; c < combos; ++c) {
      uint64_t x = c;
      for (size_t i = 0; i < us.size(); ++i) {
        tier_of(plan.placement, i) = gpu ? Tier(x % 4) : Tier::cpu;
        x /= n_tiers;
      }
      if (evaluate(m, p, b, r, plan)) best.offer(plan);
    }
  }
  return best.result("exhaustive");
}

Result<Plan> solve_search(const ModelBlocks& m, const HardwareProfile& p, const Budgets& b, const RunShape& r) {
  const bool gpu = p.has_gpu() && b.vram > 0;
  Best best(r);
  Plan plan;
  plan.placement = empty_placement(m, gpu);
  if (!gpu) {
    if (evaluate(m, p, b, r, plan)) best.offer(plan);
    return best.result("cpu-only");
  }
  const auto us = units(m, r);
  const auto full = m.full_layers();
  // GPU priority: draft path first (head, layers [0, d)), then the rest in layer order.
  std::vector<size_t> prio(us.size());
  std::iota(prio.begin(), prio.end(), 0);
  std::stable_partition(prio.begin(), prio.end(), [&](size_t i) { return us[i].draft; });
  // Remainder order: cheapest on the CPU relative to copying first.
  auto cpu_key = [&](size_t i) {
    const auto& w = *us[i].block;
    return p.h2d_gbps(w.bytes) / std::max(1e-9, p.cpu_gemv_gbps(w.main_type()));
  };
  // Among blocks the CPU computes equally well, the picks are spread over the layers: ties keep a
  // bit-reversal order of the layers (any prefix of it is spread evenly). The executor copies
  // streamed blocks only a ring's depth ahead, so copies run beside the CPU's blocks where the two
  // alternate, not where every cpu block comes first and every streamed one after: measured on the
  // H100 host (27B, --vram 12GiB), 27 contiguous cpu blocks before 34 streamed ones overlapped 2%
  // of the CPU's time with copies, and decoded at 45% of the prediction.
  uint32_t bits = 0;
  while ((1u << bits) < m.n_layer) ++bits;
  auto spread_rank = [&](size_t i) -> uint64_t {
    if (i == 0) return 0;  // the head
    const uint32_t il = uint32_t((i - 1) / 2);
    uint32_t rev = 0;
    for (uint32_t k = 0; k < bits; ++k)
      if ((il >> k) & 1) rev |= 1u << (bits - 1 - k);
    return 1 + 2 * uint64_t(rev) + (i - 1) % 2;
  };
  // Speculative runs: after the draft path, VRAM goes to the blocks in descending spread rank, so
  // the suffix left to stream (a prefix of the bit-reversal order, read backwards) is spread over
  // the layers rather than being the deepest ones. The same reason as above, for the GPU's own
  // compute: the ring copies only a slot or two ahead, so with every streamed block after the
  // resident layers a verify pass (several columns per matrix, ~2-3x a one-column step's compute)
  // runs those layers with PCIe idle and then streams; spread, each resident stretch between two
  // streamed blocks computes while the next one is copied. Plain decoding keeps layer order (its
  // resident compute is short beside the copies, and early exit then finds the longest resident
  // prefix). The order is still fixed, so more VRAM still gives a superset.
  if (r.speculative() && r.spread_streamed) {
    const auto rest = std::find_if(prio.begin(), prio.end(), [&](size_t i) { return !us[i].draft; });
    std::stable_sort(rest, prio.end(), [&](size_t a, size_t c) { return spread_rank(a) > spread_rank(c); });
  }
  std::vector<size_t> by_cpu(us.size());
  std::iota(by_cpu.begin(), by_cpu.end(), 0);
  std::sort(by_cpu.begin(), by_cpu.end(), [&](size_t a, size_t c) { return spread_rank(a) < spread_rank(c); });
  std::stable_sort(by_cpu.begin(), by_cpu.end(), [&](size_t a, size_t c) { return cpu_key(a) < cpu_key(c); });

  std::set<uint64_t> sizes{0};
  for (const auto& u : us) sizes.insert(u.block->bytes);
  const uint64_t scratch = scratch_bytes(m, r);
  // A reserved prefill group (RunShape::prefill_group_reserve) wherever blocks stream.
  const uint64_t reserve = prefill_group_bytes(m, r, reserve_chunks(r));
  // The ring's depth depends on whether the placement reads from disk (prefetch_depth_for), which
  // the search only knows at the end: it reserves each candidate depth in turn, and evaluate()
  // keeps the placements whose own depth fits.
  std::set<uint32_t> depths{prefetch_depth_for(r.prefetch_depth, false), prefetch_depth_for(r.prefetch_depth, true)};
  for (const uint32_t depth : depths)
  for (uint64_t slot : sizes) {
    const uint64_t ring = slot ? slot * (depth + 1) : 0;
    for (size_t n_host = 0; n_host <= full.size(); ++n_host) {
      // Host KV keeps prefill chunk-major (cost_model.h layer_major_prefill): nothing to reserve.
      const uint64_t group = slot && n_host == 0 ? reserve : 0;
      Placement& pl = plan.placement;
      uint64_t kv_vram = 0;
      for (uint32_t il = 0; il < m.n_layer; ++il) {
        pl.kv[il] = KvTier::gpu;
        if (n_host > 0 && !m.swa[il] && il >= full[full.size() - n_host]) pl.kv[il] = KvTier::host;
        if (pl.kv[il] == KvTier::gpu) kv_vram += m.kv_layer_bytes(il, r.ctx, r.kv, r.kv_v_dtype(), r.ring_margin());
      }
      const uint64_t fixed = kv_vram + ring + group + scratch + p.cuda_context.bytes;
      if (fixed > b.vram) continue;
      uint64_t left = b.vram - fixed;
      std::vector<bool> on_gpu(us.size(), false);
      bool forced_fit = true;
      for (size_t i = 0; i < us.size(); ++i)
        if (us[i].block->bytes > slot) {
          if (us[i].block->bytes > left) { forced_fit = false; break; }
          left -= us[i].block->bytes;
          on_gpu[i] = true;
        }
      if (!forced_fit) continue;
      size_t next = 0;  // the first block of prio the prefix did not take
      for (; next < prio.size(); ++next) {
        const size_t i = prio[next];
        if (on_gpu[i]) continue;
        if (us[i].block->bytes > left) break;  // strict prefix (see planner.h)
        left -= us[i].block->bytes;
        on_gpu[i] = true;
      }
      // A two-ended ring (RunShape::shared_ring) needs only the largest pair of neighbours among
      // the blocks left to stream, often less than the two slots reserved above: the prefix goes on
      // into the difference while blocks and ring still fit (a block taken can make a larger pair of
      // its neighbours, hence the ring is recomputed each time). evaluate() has the last word.
      if (r.shared_ring && depth == 1 && slot) {
        for (; next < prio.size(); ++next) {
          const size_t i = prio[next];
          if (on_gpu[i]) continue;
          on_gpu[i] = true;
          const uint64_t need =
              std::max(slot, shared_ring_bytes(stream_order(m, [&](size_t u) { return !on_gpu[u]; })));
          if (us[i].block->bytes + need > left + ring) {
            on_gpu[i] = false;
            break;
          }
          left -= us[i].block->bytes;
        }
      }
      std::vector<size_t> rest;
      for (size_t i : by_cpu)
        if (!on_gpu[i]) rest.push_back(i);
      const uint64_t pin_cap = b.pinned > ring ? b.pinned - ring : 0;
      for (size_t split = 0; split <= rest.size(); ++split) {
        for (size_t i = 0; i < us.size(); ++i)
          if (on_gpu[i]) tier_of(pl, i) = Tier::gpu;
        uint64_t pinned = 0;
        bool spilled = false;
        for (size_t j = 0; j < rest.size(); ++j) {
          const size_t i = rest[j];
          if (j < split) {
            tier_of(pl, i) = Tier::cpu;
          } else if (!spilled && pinned + us[i].block->bytes <= pin_cap) {
            pinned += us[i].block->bytes;
            tier_of(pl, i) = Tier::stream;
          } else {
            spilled = true;  // strict prefix in pinned, the rest on disk
            tier_of(pl, i) = Tier::disk;
          }
        }
        if (evaluate(m, p, b, r, plan)) best.offer(plan);
      }
    }
  }
  return best.result("search");
}

namespace {

Result<Plan> solve(const ModelBlocks& m, const HardwareProfile& p, const Budgets& b, const RunShape& r) {
  const bool gpu = p.has_gpu() && b.vram > 0;
  double combos = std::pow(gpu ? 4.0 : 1.0, 1.0 + 2.0 * m.n_layer) * (gpu ? std::pow(2.0, m.full_layers().size()) : 1);
  if (combos <= double(kExhaustiveLimit)) return solve_exhaustive(m, p, b, r);
  return solve_search(m, p, b, r);
}

// Smallest value in [lo, hi] for which feasible() holds (monotone), at `step` granularity.
std::optional<uint64_t> smallest(uint64_t lo, uint64_t hi, uint64_t step, const std::function<bool(uint64_t)>& feasible) {
  if (!feasible(hi)) return std::nullopt;
  while (hi - lo > step) {
    const uint64_t mid = lo + (hi - lo) / 2;
    (feasible(mid) ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace

// plan() with RunShape::prefill_group_reserve == kPrefillGroupAuto (planner.h).
static Result<Plan> plan_auto_group(const ModelBlocks& m, const HardwareProfile& p, const Budgets& b, RunShape r) {
  r.prefill_group_reserve = 0;
  auto best = plan(m, p, b, r);
  if (!best || !layer_major_prefill(best->placement) || prefill_chunks(r) < 2) return best;
  auto job_s = [&](const Plan& pl) {
    const double tps = pl.prediction.objective_tps();
    return pl.prediction.ttft_s + (tps > 0 ? double(r.gen) / tps : 0.0);
  };
  const double none_s = job_s(*best);
  uint32_t chosen = 0;
  for (const uint32_t g : {4u, 8u, 16u, kMaxPrefillGroup}) {
    if (g > prefill_chunks(r)) break;
    RunShape rg = r;
    rg.prefill_group_reserve = g;
    auto cand = solve(m, p, b, rg);
    if (cand && job_s(*cand) < job_s(*best)) best = std::move(cand), chosen = g;
  }
  best->prefill_group_choice =
      chosen ? fmt::format("reserved {} chunks automatically: predicted job {:.1f} s (prefill {:.1f} s + {} tokens) "
                           "vs {:.1f} s without",
                           chosen, job_s(*best), best->prediction.ttft_s, r.gen, none_s)
             : fmt::format("none reserved automatically: a reserve would not shorten the predicted job ({:.1f} s)",
                           none_s);
  return best;
}

Result<Plan> plan(const ModelBlocks& m, const HardwareProfile& p, const Budgets& b, const RunShape& r) {
  if (r.prefill_group_reserve == kPrefillGroupAuto) return plan_auto_group(m, p, b, r);
  auto res = solve(m, p, b, r);
  if (res) return res;
  // Infeasible: say what does not fit and by how much, then the smallest single changes that fit.
  const bool gpu = p.has_gpu() && b.vram > 0;
  uint64_t kv_full = 0, kv_swa = 0, max_block = 0;  // ring sized by layer blocks (the head stays resident)
  for (uint32_t il = 0; il < m.n_layer; ++il) {
    (m.swa[il] ? kv_swa : kv_full) += m.kv_layer_bytes(il, r.ctx, r.kv, r.kv_v_dtype(), r.ring_margin());
    max_block = std::max({max_block, m.attention[il].bytes, m.ffn[il].bytes});
  }
  const uint64_t weights = m.head.bytes + std::accumulate(m.attention.begin(), m.attention.end(), uint64_t(0),
      [](uint64_t a, const WeightBlock& w) { return a + w.bytes; }) +
      std::accumulate(m.ffn.begin(), m.ffn.end(), uint64_t(0), [](uint64_t a, const WeightBlock& w) { return a + w.bytes; });
  // The least the ring can take (no disk blocks), and what disk reads need in pinned staging.
  const uint64_t ring = max_block * (prefetch_depth_for(r.prefetch_depth, false) + 1);
  const uint64_t overhead = gpu ? scratch_bytes(m, r) + p.cuda_context.bytes + ring : 0;
  const uint64_t need = weights + kv_full + kv_swa + overhead;
  const uint64_t staging = max_block * (prefetch_depth_for(r.prefetch_depth, true) + 1);
  const uint64_t usable = (gpu ? b.vram : 0) + b.host + (gpu && b.pinned >= staging ? b.disk : 0);
  std::string msg = fmt::format(
      "does not fit: {} needs {} of weights + {} of KV ({} full-attention at {} tokens, {}) + {} of VRAM overhead "
      "(staging ring, scratch, CUDA context) = {}; the budgets give VRAM {}, pinned {}, host RAM {}, disk {}{}",
      m.name.empty() ? "the model" : m.name, format_bytes(weights), format_bytes(kv_full + kv_swa),
      format_bytes(kv_full), r.ctx, r.kv_name(), format_bytes(overhead), format_bytes(need),
      format_bytes(gpu ? b.vram : 0), format_bytes(b.pinned), format_bytes(b.host), format_bytes(b.disk),
      need > usable ? fmt::format(": short by {}", format_bytes(need - usable))
                    : ": the blocks do not pack into the tiers (a block must fit whole)");
  if (gpu && b.pinned < staging && b.disk > 0)
    msg += fmt::format(" (disk needs {} of pinned staging)", format_bytes(staging));
  std::vector<std::string> fixes;
  {
    auto ok = [&](uint64_t ctx) { RunShape s = r; s.ctx = ctx; if (s.prompt >= ctx) s.prompt = 0; return bool(solve(m, p, b, s)); };
    uint64_t lo = 0, hi = r.ctx;  // largest feasible context
    if (r.ctx > 1 && ok(1)) {
      lo = 1;
      while (hi - lo > 1) { const uint64_t mid = lo + (hi - lo) / 2; (ok(mid) ? lo : hi) = mid; }
      fixes.push_back(fmt::format("a shorter context: --ctx {}", lo));
    }
  }
  if (r.kv != KvDtype::q4 || r.kv_v_dtype() != KvDtype::q4) {
    RunShape s = r;
    s.kv = KvDtype::q4;
    s.kv_v.reset();
    if (solve(m, p, b, s)) fixes.push_back("INT4 KV: --kv q4");
  }
  const uint64_t big = need + staging + 64 * kMiB;
  if (auto v = smallest(b.pinned, b.pinned + big, 64 * kMiB, [&](uint64_t x) {
        Budgets bb = b; bb.pinned = x; bb.host = std::max(b.host, x); return bool(solve(m, p, bb, r)); }))
    fixes.push_back(fmt::format("more pinned RAM: a pinned budget of {} (+{})", format_bytes(*v), format_bytes(*v - b.pinned)));
  else if (auto h = smallest(b.host, b.host + big, 64 * kMiB, [&](uint64_t x) {
             Budgets bb = b; bb.host = x; return bool(solve(m, p, bb, r)); }))
    fixes.push_back(fmt::format("more host RAM: {} (+{})", format_bytes(*h), format_bytes(*h - b.host)));
  if (gpu) {
    if (auto v = smallest(b.vram, b.vram + big, 64 * kMiB, [&](uint64_t x) {
          Budgets bb = b; bb.vram = x; return bool(solve(m, p, bb, r)); }))
      fixes.push_back(fmt::format("more VRAM: --vram {} (+{})", format_bytes(*v), format_bytes(*v - b.vram)));
  }
  if (fixes.empty()) fixes.push_back("none of a shorter context, INT4 KV, more pinned RAM or VRAM alone is enough");
  msg += "; smallest changes that fit: ";
  for (size_t i = 0; i < fixes.size(); ++i) msg += (i ? "; or " : "") + fixes[i];
  return Status::error("{}", msg);
}

}  // namespace strata::offload

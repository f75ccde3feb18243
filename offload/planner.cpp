// Plan JSON and the placement report.
//
// JSON schema "strata.plan/1" (keys are stable; new keys may be added, none renamed):
// { "schema": "strata.plan/1", "model": {name, arch, n_layer, weight_bytes},
//   "profile": name, "budgets": {vram, pinned, host, disk} (bytes),
//   "run": {ctx, prompt, gen, kv (K's format), kv_v (V's), draft_depth, draft_len, acceptance,
//           require_draft_resident},
//   "solver": "exhaustive"|"search"|"cpu-only", "prefill_group_choice" (only with --prefill-group auto: why),
//   "cpu_tier_choice" (only where --cpu-blocks decided something: Plan::cpu_tier_choice),
//   "tiers": {gpu|stream|disk|cpu: {blocks, bytes}},
//   "usage": {vram_weights, vram_kv, vram_staging, vram_scratch, vram_context, vram_prefill_group, vram_total,
//             pinned_weights, pinned_staging, host_cpu_weights, host_kv, disk} (bytes),
//   "staging": {ring_slots, ring_slot_bytes, ring_shared (two slots in one buffer of vram_staging
//               bytes: offload/shared_ring.h), prefetch_depth},
//   "layers": [{layer, swa, attention, ffn, kv, attention_bytes, ffn_bytes, kv_bytes}],
//   "head": {tier, bytes}, "draft_resident": bool,
//   "predicted": {decode_tps, spec_tps, prefill_tps, prefill_group (chunks per layer-major group, 1:
//                 chunk by chunk), ttft_s, step_s, bottleneck,
//                 step: {h2d_s, disk_s, gpu_s, cpu_s, host_s, h2d_bytes, disk_bytes, cpu_bytes}} }
#include <algorithm>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "core/units.h"
#include "offload/planner.h"

namespace strata::offload {
namespace {

struct TierTotals { uint64_t blocks[4] = {}, bytes[4] = {}; };

TierTotals totals(const ModelBlocks& m, const Plan& plan) {
  TierTotals t;
  auto add = [&](const WeightBlock& w, Tier tier) { t.blocks[int(tier)]++; t.bytes[int(tier)] += w.bytes; };
  add(m.head, plan.placement.head);
  for (uint32_t il = 0; il < m.n_layer; ++il) {
    add(m.attention[il], plan.placement.attention[il]);
    add(m.ffn[il], plan.placement.ffn[il]);
  }
  return t;
}

nlohmann::json sweep_json(const SweepCost& c) {
  return {{"h2d_s", c.h2d_s}, {"disk_s", c.disk_s}, {"gpu_s", c.gpu_s}, {"cpu_s", c.cpu_s}, {"host_s", c.host_s},
          {"h2d_bytes", c.h2d_bytes}, {"disk_bytes", c.disk_bytes}, {"cpu_bytes", c.cpu_bytes}};
}

}  // namespace

nlohmann::json plan_json(const ModelBlocks& m, const HardwareProfile& p, const Budgets& b, const RunShape& r,
                         const Plan& plan) {
  nlohmann::json j;
  j["schema"] = "strata.plan/1";
  j["model"] = {{"name", m.name}, {"arch", m.arch}, {"n_layer", m.n_layer}, {"weight_bytes", m.weight_bytes()}};
  j["profile"] = p.name;
  j["budgets"] = {{"vram", b.vram}, {"pinned", b.pinned}, {"host", b.host}, {"disk", b.disk}};
  j["run"] = {{"ctx", r.ctx}, {"prompt", r.prompt_tokens()}, {"gen", r.gen}, {"kv", kv_dtype_name(r.kv)}, {"kv_v", kv_dtype_name(r.kv_v_dtype())},
              {"draft_depth", r.draft_depth}, {"draft_len", r.draft_len}, {"acceptance", r.acceptance},
              {"require_draft_resident", r.require_draft_resident}, {"decode_rows", r.decode_rows}};
  j["solver"] = plan.solver;
  if (!plan.prefill_group_choice.empty()) j["prefill_group_choice"] = plan.prefill_group_choice;
  if (!plan.cpu_tier_choice.empty()) j["cpu_tier_choice"] = plan.cpu_tier_choice;
  const auto t = totals(m, plan);
  for (int i = 0; i < 4; ++i) j["tiers"][tier_name(Tier(i))] = {{"blocks", t.blocks[i]}, {"bytes", t.bytes[i]}};
  const Usage& u = plan.usage;
  j["usage"] = {{"vram_weights", u.vram_weights}, {"vram_kv", u.vram_kv}, {"vram_staging", u.vram_staging},
                {"vram_scratch", u.vram_scratch}, {"vram_context", u.vram_context},
                {"vram_prefill_group", u.vram_prefill_group}, {"vram_total", u.vram_total()},
                {"pinned_weights", u.pinned_weights}, {"pinned_staging", u.pinned_staging},
                {"host_cpu_weights", u.host_cpu_weights}, {"host_kv", u.host_kv}, {"disk", u.disk}};
  j["staging"] = {{"ring_slots", plan.ring_slots}, {"ring_slot_bytes", plan.ring_slot_bytes},
                  {"ring_shared", plan.ring_shared}, {"prefetch_depth", plan.prefetch_depth}};
  auto& layers = j["layers"] = nlohmann::json::array();
  for (uint32_t il = 0; il < m.n_layer; ++il)
    layers.push_back({{"layer", il}, {"swa", bool(m.swa[il])},
                      {"attention", tier_name(plan.placement.attention[il])},
                      {"ffn", tier_name(plan.placement.ffn[il])}, {"kv", kv_tier_name(plan.placement.kv[il])},
                      {"attention_bytes", m.attention[il].bytes}, {"ffn_bytes", m.ffn[il].bytes},
                      {"kv_bytes", m.kv_layer_bytes(il, r.ctx, r.kv, r.kv_v_dtype(), r.ring_margin())}});
  j["head"] = {{"tier", tier_name(plan.placement.head)}, {"bytes", m.head.bytes}};
  j["draft_resident"] = plan.draft_resident;
  const Prediction& pr = plan.prediction;
  j["predicted"] = {{"decode_tps", pr.decode_tps}, {"spec_tps", pr.spec_tps}, {"prefill_tps", pr.prefill_tps},
                    {"prefill_group", pr.prefill_group},
                    {"ttft_s", pr.ttft_s}, {"step_s", pr.step.total_s()}, {"bottleneck", pr.step.bottleneck(p)},
                    {"step", sweep_json(pr.step)}};
  return j;
}

std::string plan_report(const ModelBlocks& m, const HardwareProfile& p, const Budgets& b, const RunShape& r,
                        const Plan& plan) {
  std::string o;
  const Usage& u = plan.usage;
  o += fmt::format("placement: {} ({} layers, {} of weights) on {}, ctx {}, KV {}, solver {}\n",
                   m.name.empty() ? m.arch : m.name, m.n_layer, format_bytes(m.weight_bytes()), p.name, r.ctx,
                   r.kv_name(), plan.solver);
  {  // the weight types, by bytes (an i-quant or mixed file says what it holds)
    std::map<GgmlType, uint64_t> by_type;
    auto add = [&](const WeightBlock& wb) {
      for (const auto& [t, n] : wb.bytes_by_type) by_type[t] += n;
    };
    for (const auto& wb : m.attention) add(wb);
    for (const auto& wb : m.ffn) add(wb);
    add(m.head);
    if (!m.tied_head) add(m.embedding);
    std::vector<std::pair<uint64_t, GgmlType>> order;
    uint64_t total = 0;
    for (const auto& [t, n] : by_type) order.emplace_back(n, t), total += n;
    std::sort(order.rbegin(), order.rend());
    std::string line;
    for (const auto& [n, t] : order)
      line += fmt::format("{}{} {} ({:.0f}%)", line.empty() ? "" : ", ", ggml_type_info(t).name, format_bytes(n),
                          total ? 100.0 * double(n) / double(total) : 0.0);
    if (!line.empty()) o += fmt::format("types:     {}\n", line);
  }
  o += fmt::format("budgets:   VRAM {}, pinned {}, host RAM {}, disk {}\n", format_bytes(b.vram),
                   format_bytes(b.pinned), format_bytes(b.host), format_bytes(b.disk));
  const auto t = totals(m, plan);
  o += "tiers:\n";
  for (int i = 0; i < 4; ++i)
    o += fmt::format("  {:<7} {:>4} blocks {:>12}\n", tier_name(Tier(i)), t.blocks[i], format_bytes(t.bytes[i]));
  const std::string ring = plan.ring_shared ? fmt::format("{} slots sharing one buffer", plan.ring_slots)
                                             : fmt::format("{} x {}", plan.ring_slots, format_bytes(plan.ring_slot_bytes));
  o += fmt::format("VRAM:      {} of {} = weights {} + KV {} + staging {} ({}) + scratch {} + CUDA context {}{}\n",
                   format_bytes(u.vram_total()), format_bytes(b.vram), format_bytes(u.vram_weights),
                   format_bytes(u.vram_kv), format_bytes(u.vram_staging), ring, format_bytes(u.vram_scratch),
                   format_bytes(u.vram_context),
                   u.vram_prefill_group ? fmt::format(" + prefill group {}", format_bytes(u.vram_prefill_group)) : "");
  o += fmt::format("host:      pinned {} of {} (weights {} + staging {}), CPU weights {}, host KV {}; disk {}\n",
                   format_bytes(u.pinned_total()), format_bytes(b.pinned), format_bytes(u.pinned_weights),
                   format_bytes(u.pinned_staging), format_bytes(u.host_cpu_weights), format_bytes(u.host_kv),
                   format_bytes(u.disk));
  o += fmt::format("prefetch:  depth {}\n", plan.prefetch_depth);
  if (!plan.prefill_group_choice.empty())
    o += fmt::format("prefill:   group of {} chunks; {}\n", plan.prefill_group, plan.prefill_group_choice);
  if (!plan.cpu_tier_choice.empty()) o += fmt::format("cpu tier:  {}\n", plan.cpu_tier_choice);
  o += fmt::format("layers:    {:>5} {:>5} {:>7} {:>7} {:>5} {:>11}\n", "layer", "kind", "attn", "ffn", "kv", "kv bytes");
  for (uint32_t il = 0; il < m.n_layer; ++il)
    o += fmt::format("           {:>5} {:>5} {:>7} {:>7} {:>5} {:>11}\n", il, m.swa[il] ? "swa" : "full",
                     tier_name(plan.placement.attention[il]), tier_name(plan.placement.ffn[il]),
                     kv_tier_name(plan.placement.kv[il]), format_bytes(m.kv_layer_bytes(il, r.ctx, r.kv, r.kv_v_dtype(), r.ring_margin())));
  o += fmt::format("           {:>5} {:>5} {:>7}\n", "head", "", tier_name(plan.placement.head));
  const Prediction& pr = plan.prediction;
  o += fmt::format("predicted: decode {:.2f} tok/s plain", pr.decode_tps);
  if (r.decode_rows > 1) o += fmt::format(" in all ({} sequences stepping together)", r.decode_rows);
  if (r.speculative())
    o += fmt::format(", {:.2f} tok/s speculative (draft depth {}, k {}, assumed acceptance {:.2f}; draft path {})",
                     pr.spec_tps, r.draft_depth, r.draft_len, r.acceptance,
                     plan.draft_resident ? "resident" : "NOT resident");
  const std::string order =
      pr.prefill_group > 1 ? fmt::format("layer-major, groups of {} chunks of {}", pr.prefill_group, r.prefill_chunk)
                           : fmt::format("chunk by chunk, {} tokens each", std::min<uint64_t>(r.prefill_chunk, r.prompt_tokens()));
  o += fmt::format("\n           prefill {:.0f} tok/s ({}), time to first token {:.2f} s for a {}-token prompt\n",
                   pr.prefill_tps, order, pr.ttft_s, r.prompt_tokens());
  o += fmt::format("bottleneck: {}\n", pr.step.bottleneck(p));
  return o;
}

}  // namespace strata::offload

// Importance matrices end to end: the GGUF imatrix format (llama.cpp's names and shapes) round
// trips and bad files are refused; `strata imatrix` on the embedded model sums what each matrix
// sees (inputs shared by q/k/v and gate/up give equal sums, counts are the tokens evaluated);
// `quantize --imatrix` uses it, refuses iq2_xxs without one; an i-quant mix plans and inspects
// with its types named.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <sys/wait.h>

#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/imatrix.h"
#include "cli_run.h"
#include "test_util.h"

namespace {

using namespace strata;

using test::has;
using test::run_strata;
size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

const std::string kModel = std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny-q4_k.gguf";
const std::string kText = std::string(STRATA_SOURCE_DIR) + "/README.md";

}  // namespace

TEST_CASE("imatrix format: round trip, llama.cpp's names, bad files refused", "[imatrix]") {
  const auto dir = test::temp_dir("imatrix-format");
  model::Imatrix m;
  m.datasets = {"a.txt"};
  m.chunk_count = 3;
  m.chunk_size = 64;
  m.entries["blk.0.attn_q.weight"] = {4, 1, {1, 2, 3, 4}, {2}};
  m.entries["blk.0.ffn_down.weight"] = {2, 1, {0, 8}, {4}};
  const std::string path = (dir / "m.imatrix").string();
  REQUIRE(model::write_imatrix(m, path).is_ok());

  auto f = gguf::File::open(path);
  REQUIRE(f.is_ok());
  CHECK(f->get_string("general.type").value() == "imatrix");
  CHECK(f->get_u32("imatrix.chunk_count").value() == 3);
  CHECK(f->get_u32("imatrix.chunk_size").value() == 64);
  const auto* s2 = f->find_tensor("blk.0.attn_q.weight.in_sum2");
  const auto* c = f->find_tensor("blk.0.attn_q.weight.counts");
  REQUIRE(s2);
  REQUIRE(c);
  CHECK(s2->ne == std::vector<uint64_t>{4, 1});
  CHECK(c->ne == std::vector<uint64_t>{1, 1});

  auto back = model::read_imatrix(path);
  REQUIRE(back.is_ok());
  CHECK(back->datasets == m.datasets);
  CHECK(back->chunk_count == 3);
  REQUIRE(back->entries.size() == 2);
  CHECK(back->entries.at("blk.0.attn_q.weight").sum2 == std::vector<float>{1, 2, 3, 4});
  CHECK(back->importance("blk.0.attn_q.weight") == std::vector<float>{0.5f, 1, 1.5f, 2});
  CHECK(back->importance("blk.0.ffn_down.weight") == std::vector<float>{0, 2});
  CHECK(back->importance("blk.9.ffn_down.weight").empty());

  // An in_sum2 without its counts; a model file instead of an imatrix.
  gguf::Writer w;
  w.set("general.type", gguf::Value::string("imatrix"));
  const float v[2] = {1, 2};
  const size_t i = w.add_tensor("x.weight.in_sum2", GgmlType::F32, {2, 1});
  const std::string bad = (dir / "bad.imatrix").string();
  REQUIRE(w.begin(bad).is_ok());
  REQUIRE(w.write_tensor(i, v, sizeof v).is_ok());
  REQUIRE(w.finish().is_ok());
  auto r = model::read_imatrix(bad);
  REQUIRE_FALSE(r.is_ok());
  CHECK(has(r.message(), "x.weight.counts"));
  auto r2 = model::read_imatrix(kModel);
  REQUIRE_FALSE(r2.is_ok());
  CHECK(has(r2.message(), "not an importance matrix"));
}

TEST_CASE("strata imatrix on the embedded model, and quantize --imatrix uses it", "[imatrix]") {
  const auto dir = test::temp_dir("imatrix-run");
  const std::string out = (dir / "tiny.imatrix").string();
  auto run = run_strata("imatrix -m " + kModel + " -f " + kText + " -o " + out + " -c 64 --chunks 3");
  INFO(run.err);
  REQUIRE(run.code == 0);
  CHECK(has(run.err, "chunk 3/3"));
  auto m = model::read_imatrix(out);
  REQUIRE(m.is_ok());
  CHECK(m->chunk_count == 3);
  CHECK(m->chunk_size == 64);
  CHECK(m->datasets == std::vector<std::string>{kText});
  // 12 layers x 7 matrices; no head (not evaluated).
  CHECK(m->entries.size() == 12 * 7);
  CHECK(m->entries.count("token_embd.weight") == 0);
  for (int il = 0; il < 12; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    INFO(b);
    const auto& q = m->entries.at(b + "attn_q.weight");
    CHECK(q.counts == std::vector<float>{192});
    CHECK(q.n_in == 512);
    CHECK(m->entries.at(b + "attn_k.weight").sum2 == q.sum2);  // the same normed input
    CHECK(m->entries.at(b + "attn_v.weight").sum2 == q.sum2);
    CHECK(m->entries.at(b + "ffn_gate.weight").sum2 == m->entries.at(b + "ffn_up.weight").sum2);
    CHECK(m->entries.at(b + "ffn_gate.weight").sum2 != q.sum2);
    CHECK(m->entries.at(b + "ffn_down.weight").n_in == 1024);
    bool positive = true;
    for (float v : q.sum2) positive = positive && v > 0 && std::isfinite(v);
    CHECK(positive);
  }

  const std::string q = (dir / "tiny-iq3_xxs.gguf").string();
  auto qr = run_strata("quantize --no-progress --imatrix " + out + " " + kModel + " " + q + " --mix iq3_xxs");
  INFO(qr.err);
  REQUIRE(qr.code == 0);
  // 12 layers x q, k, o, gate, up, down; attn_v (q4_k in this GQA model: as in the source) is
  // copied, the tied head (q5_k) has no entry.
  CHECK(has(qr.err, "(72 with the imatrix)"));
  auto insp = run_strata("inspect " + q);
  REQUIRE(insp.code == 0);
  CHECK(has(insp.out, "iq3_xxs"));
  CHECK(has(insp.out, "bits/weight"));

  // Bad input: one line each.
  auto no_imatrix = run_strata("quantize --no-progress " + kModel + " " + (dir / "x.gguf").string() + " iq2_xxs");
  CHECK(no_imatrix.code != 0);
  CHECK(has(no_imatrix.err, "iq2_xxs needs --imatrix"));
  CHECK(lines(no_imatrix.err) <= 2);  // the requantisation warning may precede it
  auto bad_im = run_strata("quantize --no-progress --imatrix " + kText + " " + kModel + " " +
                           (dir / "y.gguf").string() + " iq3_xxs");
  CHECK(bad_im.code == 2);
  CHECK(lines(bad_im.err) == 1);
  // --process-output: the head runs on every row, so the tied head's tensor gets an entry that
  // sees the final normed stream (not the layers' inputs), and quantize then weights it too.
  const std::string with_head = (dir / "tiny-head.imatrix").string();
  auto wh = run_strata("imatrix -m " + kModel + " -f " + kText + " -o " + with_head + " -c 64 --chunks 3 --process-output");
  INFO(wh.err);
  REQUIRE(wh.code == 0);
  auto mh = model::read_imatrix(with_head);
  REQUIRE(mh.is_ok());
  CHECK(mh->entries.size() == 12 * 7 + 1);
  REQUIRE(mh->entries.count("token_embd.weight") == 1);
  const auto& head = mh->entries.at("token_embd.weight");
  CHECK(head.n_in == 512);
  CHECK(head.counts == std::vector<float>{192});
  CHECK(head.sum2 != mh->entries.at("blk.11.ffn_gate.weight").sum2);
  CHECK(mh->entries.at("blk.0.attn_q.weight").sum2 == m->entries.at("blk.0.attn_q.weight").sum2);  // the rest as before
  auto qh = run_strata("quantize --no-progress --imatrix " + with_head + " " + kModel + " " +
                       (dir / "tiny-iq4_xs.gguf").string() + " iq4_xs");
  INFO(qh.err);
  REQUIRE(qh.code == 0);
  CHECK(has(qh.err, "(85 with the imatrix)"));  // every matrix, the tied head among them

  auto missing = run_strata("imatrix -m " + kModel + " -f /nonexistent.txt -o " + out);
  CHECK(missing.code != 0);
  CHECK(lines(missing.err) == 1);
  CHECK(has(missing.err, "/nonexistent.txt"));
}

TEST_CASE("an i-quant mix: synth header-only, plan and inspect name the types", "[imatrix]") {
  const auto dir = test::temp_dir("imatrix-mix");
  const std::string f = (dir / "iq3.gguf").string();
  auto s = run_strata("synth --arch gemma3 --preset 1b --mix iq3_xxs --header-only --no-progress -o " + f);
  INFO(s.err);
  REQUIRE(s.code == 0);
  auto i = run_strata("inspect " + f);
  REQUIRE(i.code == 0);
  CHECK(has(i.out, "iq3_xxs"));
  CHECK(has(i.out, "bits/weight"));
  auto p = run_strata("plan -m " + f + " --profile " + std::string(STRATA_SOURCE_DIR) +
                      "/configs/hw/rtx3060-12g.toml --ctx 4096");
  INFO(p.err);
  REQUIRE(p.code == 0);
  CHECK(has(p.out, "iq3_xxs"));
}

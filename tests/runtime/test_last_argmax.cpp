// CpuForward::last_argmax (Engine::last_argmax): the head's thread-team parts take the maximum of
// the logits they write; it must be runtime::argmax of the logits the eval returned, for the int8
// and exact products, on teams of one and several threads, for chunk-major and layer-major
// prefill and each decode step -- and -1 after every call that wrote other logits.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include "runtime/cpu_forward.h"
#include "runtime/sampler.h"
#include "test_util.h"

using namespace strata;

TEST_CASE("last_argmax is the argmax of the last eval's logits, and -1 after other calls", "[runtime][argmax]") {
  auto model = runtime::Model::load(std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny-q4_k.gguf");
  REQUIRE(model.is_ok());
  const uint32_t n_vocab = (*model)->spec.hp.n_vocab;
  std::vector<int32_t> prompt(61);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 7919 + 13) % n_vocab);
  for (const bool int8 : {true, false}) {
    for (const uint32_t group : {0u, 48u}) {
      for (const int threads : {1, 3}) {
        INFO((int8 ? "int8" : "exact") << ", group " << group << ", " << threads << " threads");
        tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
        tbb::task_arena(threads).execute([&] {
          runtime::ForwardOptions o{.n_ctx = 256, .ubatch = 16, .placement = {}, .trace = {}};
          o.cpu_int8 = int8;
          o.prefill_group_tokens = group;
          auto e = runtime::CpuForward::create(model.value(), o);
          REQUIRE(e.is_ok());
          runtime::CpuForward& f = **e;
          std::vector<float> logits;
          CHECK(f.last_argmax() == -1);
          REQUIRE(f.eval(prompt, runtime::Logits::last, logits).is_ok());
          CHECK(f.last_argmax() == runtime::argmax(logits));
          for (int step = 0; step < 6; ++step) {
            const int32_t next = runtime::argmax(logits);
            REQUIRE(f.eval(std::span(&next, 1), runtime::Logits::last, logits).is_ok());
            REQUIRE(f.last_argmax() >= 0);
            CHECK(f.last_argmax() == runtime::argmax(logits));
          }
          // Calls that write other logits (or none) drop it.
          const int32_t tok = prompt[3];
          REQUIRE(f.eval(std::span(&tok, 1), runtime::Logits::all, logits).is_ok());
          CHECK(f.last_argmax() == -1);
          REQUIRE(f.eval(std::span(&tok, 1), runtime::Logits::last, logits).is_ok());
          REQUIRE(f.last_argmax() >= 0);
          REQUIRE(f.eval(std::span(&tok, 1), runtime::Logits::none, logits).is_ok());
          CHECK(f.last_argmax() == -1);
          REQUIRE(f.eval(std::span(&tok, 1), runtime::Logits::last, logits).is_ok());
          REQUIRE(f.eval_layers(std::span(&tok, 1), f.n_past(), {}, runtime::Logits::last, logits).is_ok());
          CHECK(f.last_argmax() == -1);
          const int32_t bad = int32_t(n_vocab);
          REQUIRE(f.eval(std::span(&tok, 1), runtime::Logits::last, logits).is_ok());
          CHECK(!f.eval(std::span(&bad, 1), runtime::Logits::last, logits).is_ok());
          CHECK(f.last_argmax() == -1);
        });
      }
    }
  }
}

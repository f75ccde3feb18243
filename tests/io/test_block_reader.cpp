// BlockReader: every backend returns the file's bytes for random ranges (unaligned, the tail,
// spanning chunks), and every injected fault gives an error naming file, block and offset with no
// data handed on.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/rng.h"
#include "io/aligned_buffer.h"
#include "io/block_reader.h"
#include "io/crc32c.h"
#include "io/fault_engine.h"
#include "test_util.h"

using namespace strata;
using namespace strata::io;

namespace {

bool has(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

// A file of `n` random bytes; its content is returned for comparison.
std::vector<uint8_t> write_random_file(const std::string& path, uint64_t n, uint64_t seed) {
  std::vector<uint8_t> bytes(n);
  Rng rng(seed);
  for (auto& b : bytes) b = uint8_t(rng.next_u32());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(n));
  return bytes;
}

bool uring_available() { return make_uring_engine(4).is_ok(); }

struct Case {
  const char* name;
  Backend backend;
  DirectIo direct;
};

// One op with its own buffer, poisoned so that bytes never written show up as a mismatch.
struct OwnedOp {
  AlignedBuffer buf;
  ReadOp op;
};
OwnedOp make_op(uint64_t offset, uint64_t bytes, const std::string& label = "blk") {
  OwnedOp o;
  auto b = AlignedBuffer::allocate(std::max<uint64_t>(enclosing_span_bytes(offset, bytes), 1));
  REQUIRE(b.is_ok());
  o.buf = std::move(*b);
  std::memset(o.buf.data(), 0xA5, o.buf.size());
  o.op.offset = offset;
  o.op.bytes = bytes;
  o.op.buffer = o.buf.span();
  o.op.label = label;
  return o;
}

bool same(std::span<const uint8_t> got, const std::vector<uint8_t>& file, uint64_t offset) {
  return got.size() == 0 || std::memcmp(got.data(), file.data() + offset, got.size()) == 0;
}

std::unique_ptr<BlockReader> open_or_fail(const std::string& path, const ReaderOptions& opt) {
  auto r = BlockReader::open(path, opt);
  INFO((r ? "" : r.message()));
  REQUIRE(r.is_ok());
  return std::move(*r);
}

ReaderOptions faulty(FaultPlan plan, ReaderOptions opt = {}) {
  opt.wrap_engine = [plan](std::unique_ptr<ReadEngine> e) { return make_fault_engine(std::move(e), plan); };
  return opt;
}

}  // namespace

TEST_CASE("crc32c: known answers, chaining, portable == dispatched", "[io]") {
  const std::string s = "123456789";
  const std::span<const uint8_t> b(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  CHECK(crc32c(b) == 0xE3069283u);
  CHECK(crc32c_portable(b) == 0xE3069283u);
  CHECK(crc32c({}) == 0u);
  CHECK(crc32c(b.subspan(4), crc32c(b.first(4))) == 0xE3069283u);
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  std::vector<uint8_t> data(70000);
  for (auto& x : data) x = uint8_t(rng.next_u32());
  for (int i = 0; i < 50; ++i) {
    const size_t off = rng.next_u32() % 64, n = rng.next_u32() % (data.size() - off);
    const std::span<const uint8_t> v(data.data() + off, n);
    CHECK(crc32c(v) == crc32c_portable(v));
  }
  std::vector<uint8_t> flipped = data;
  flipped[1234] ^= 1;
  CHECK(crc32c(flipped) != crc32c(data));
}

TEST_CASE("aligned spans", "[io]") {
  CHECK(enclosing_span_bytes(0, 4096) == 4096);
  CHECK(enclosing_span_bytes(32, 4096) == 8192);
  CHECK(enclosing_span_bytes(4095, 2) == 8192);
  CHECK(enclosing_span_bytes(8192, 0) == 0);
  auto b = AlignedBuffer::allocate(5000);
  REQUIRE(b.is_ok());
  CHECK(b->size() == 8192);
  CHECK(reinterpret_cast<uintptr_t>(b->data()) % 4096 == 0);
}

TEST_CASE("block reader: every backend reads random ranges exactly", "[io]") {
  const auto dir = test::temp_dir("io-ranges");
  const std::string path = (dir / "data.bin").string();
  const uint64_t size = 3 * (1 << 20) + 12345;  // an unaligned tail
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  const auto file = write_random_file(path, size, seed);
  std::vector<Case> cases = {{"pread, O_DIRECT", Backend::pread, DirectIo::on},
                             {"pread, page cache", Backend::pread, DirectIo::off}};
  if (uring_available()) {
    cases.push_back({"io_uring, O_DIRECT", Backend::io_uring, DirectIo::on});
    cases.push_back({"io_uring, page cache", Backend::io_uring, DirectIo::off});
  } else {
    WARN("io_uring unavailable here: only the pread backend is compared");
  }
  Rng rng(seed + 1);
  for (const auto& c : cases) {
    INFO(c.name);
    ReaderOptions opt;
    opt.backend = c.backend;
    opt.direct = c.direct;
    opt.queue_depth = 1 + rng.next_u32() % 8;
    opt.chunk_bytes = 4096 * (1 + rng.next_u32() % 64);  // ranges span several chunks
    auto r = open_or_fail(path, opt);
    CHECK(r->direct() == (c.direct == DirectIo::on));
    CHECK(r->notice().empty());
    for (int batch = 0; batch < 8; ++batch) {
      std::vector<OwnedOp> owned;
      // Fixed shapes first: the tail, the whole file, a 32 B-aligned GGUF-like tensor, one byte.
      if (batch == 0) {
        owned.push_back(make_op(size - 100, 100, "tail"));
        owned.push_back(make_op(0, size, "whole"));
        owned.push_back(make_op(4096 * 7 + 32, 300000, "tensor"));
        owned.push_back(make_op(size - 1, 1, "last byte"));
        owned.push_back(make_op(777, 0, "empty"));
      }
      for (int i = 0; i < 6; ++i) {
        const uint64_t off = rng.next_u64() % size;
        const uint64_t n = rng.next_u64() % std::min<uint64_t>(size - off + 1, 600000);
        owned.push_back(make_op(off, n, "random"));
      }
      std::vector<ReadOp> ops;
      for (auto& o : owned) ops.push_back(o.op);
      const Status s = r->read(ops);
      INFO((s ? "" : s.message()));
      REQUIRE(s.is_ok());
      for (const auto& op : ops) {
        INFO(op.label << " [" << op.offset << ", +" << op.bytes << ")");
        CHECK(op.data.size() == op.bytes);
        CHECK(same(op.data, file, op.offset));
      }
    }
  }
}

TEST_CASE("block reader: automatic fallbacks say which and why", "[io]") {
  const auto dir = test::temp_dir("io-fallback");
  const std::string path = (dir / "data.bin").string();
  const auto file = write_random_file(path, 100000, 7);

  SECTION("io_uring refused -> pread pool, with a notice") {
    ReaderOptions opt;
    opt.make_uring = [](uint32_t) -> Result<std::unique_ptr<ReadEngine>> {
      return Status::error("io_uring_queue_init: {}", std::strerror(EPERM));
    };
    auto r = open_or_fail(path, opt);
    CHECK(has(r->backend_name(), "pread pool"));
    CHECK(has(r->notice(), "io_uring is unavailable"));
    CHECK(has(r->notice(), "Operation not permitted"));
    CHECK(r->notice().find('\n') == std::string::npos);  // one line
    auto o = make_op(5000, 60000);
    REQUIRE(r->read(o.op).is_ok());
    CHECK(same(o.op.data, file, 5000));
    opt.backend = Backend::io_uring;  // forced: no fallback
    auto forced = BlockReader::open(path, opt);
    REQUIRE_FALSE(forced.is_ok());
    CHECK(has(forced.message(), "io_uring is unavailable"));
  }
  SECTION("O_DIRECT refused at read -> page cache, with a notice") {
    FaultPlan plan;
    plan.kind = FaultPlan::Kind::no_direct;
    auto r = open_or_fail(path, faulty(plan));
    REQUIRE(r->direct());
    auto o = make_op(123, 99000);
    const Status s = r->read(o.op);
    INFO((s ? "" : s.message()));
    REQUIRE(s.is_ok());
    CHECK(same(o.op.data, file, 123));
    CHECK(o.op.data.size() == 99000);
    CHECK_FALSE(r->direct());
    CHECK(has(r->backend_name(), "pread pool"));
    CHECK(has(r->notice(), "refuses O_DIRECT"));
    CHECK(has(r->notice(), "Invalid argument"));
    ReaderOptions forced = faulty(plan);
    forced.direct = DirectIo::on;
    auto f = open_or_fail(path, forced);
    auto o2 = make_op(0, 10);
    const Status s2 = f->read(o2.op);
    REQUIRE_FALSE(s2.is_ok());
    CHECK(has(s2.message(), "Invalid argument"));
    CHECK(o2.op.data.empty());
  }
  SECTION("O_DIRECT refused at open (tmpfs on older kernels)") {
    const std::string shm = "/dev/shm/strata-io-test-" + std::to_string(::getpid());
    write_random_file(shm, 10000, 3);
    auto r = open_or_fail(shm, {});
    if (r->direct()) {
      WARN("/dev/shm accepts O_DIRECT on this kernel: the open-time fallback is not exercised");
    } else {
      CHECK(has(r->notice(), "refuses O_DIRECT"));
      ReaderOptions on;
      on.direct = DirectIo::on;
      CHECK_FALSE(BlockReader::open(shm, on).is_ok());
    }
    auto o = make_op(10, 9000);
    CHECK(r->read(o.op).is_ok());
    std::filesystem::remove(shm);
  }
}

TEST_CASE("block reader: injected faults give clear errors and no data", "[io]") {
  const auto dir = test::temp_dir("io-faults");
  const std::string path = (dir / "model.gguf").string();
  const uint64_t size = 2 * (1 << 20) + 999;
  const auto file = write_random_file(path, size, 11);
  // Two blocks per batch: a failure in either must leave both without data.
  auto run = [&](const ReaderOptions& opt, const char* want, bool direct_too = true) {
    for (Backend be : {Backend::pread, Backend::io_uring}) {
      if (be == Backend::io_uring && !uring_available()) continue;
      for (DirectIo d : {DirectIo::on, DirectIo::off}) {
        if (d == DirectIo::on && !direct_too) continue;
        ReaderOptions o = opt;
        o.backend = be;
        o.direct = d;
        o.chunk_bytes = 256 * 1024;
        auto r = open_or_fail(path, o);
        INFO(r->backend_name());
        auto a = make_op(100, 400000, "blk.0.attn");
        auto b = make_op(1500000, size - 1500000, "blk.1.ffn");
        std::vector<ReadOp> ops{a.op, b.op};
        const Status s = r->read(ops);
        if (!want) {
          INFO((s ? "" : s.message()));
          REQUIRE(s.is_ok());
          CHECK(same(ops[0].data, file, 100));
          CHECK(same(ops[1].data, file, 1500000));
          CHECK(ops[1].data.size() == size - 1500000);
          continue;
        }
        REQUIRE_FALSE(s.is_ok());
        INFO(s.message());
        CHECK(has(s.message(), path));
        CHECK(has(s.message(), "blk."));
        CHECK(has(s.message(), "offset"));
        CHECK(has(s.message(), want));
        CHECK(ops[0].data.empty());
        CHECK(ops[1].data.empty());
      }
    }
  };
  FaultPlan p;
  SECTION("EIO") {
    p.kind = FaultPlan::Kind::eio;
    p.at_offset = 1600000;
    run(faulty(p), "Input/output error");
  }
  SECTION("short reads are resumed") {
    p.kind = FaultPlan::Kind::short_reads;
    p.seed = test::fresh_seed();
    ReaderOptions o = faulty(p);
    o.max_retries = 1000;
    run(o, nullptr);
  }
  SECTION("a short EAGAIN storm is ridden out, a long one is an error") {
    p.kind = FaultPlan::Kind::eagain_storm;
    p.count = 10;
    run(faulty(p), nullptr);
    p.count = 1000;
    run(faulty(p), "Resource temporarily unavailable after 16 retries");
  }
  SECTION("very slow reads hit the limit") {
    p.kind = FaultPlan::Kind::slow;
    p.delay_ms = 30;
    ReaderOptions o = faulty(p);
    o.timeout_ms = 5;
    run(o, "over the 5 ms limit", false);
    o.timeout_ms = 0;  // no limit: slow but correct
    run(o, nullptr, false);
  }
  SECTION("the file ends early (truncated under the reader)") {
    p.kind = FaultPlan::Kind::truncated;
    p.at_offset = 1700000;
    run(faulty(p), "end of the file");
  }
}

TEST_CASE("block reader: a file truncated, modified or replaced after open", "[io]") {
  const auto dir = test::temp_dir("io-identity");
  const std::string path = (dir / "model.gguf").string();
  write_random_file(path, 200000, 5);
  SECTION("truncated") {
    auto r = open_or_fail(path, {});
    std::filesystem::resize_file(path, 100000);
    auto o = make_op(150000, 1000, "blk.9.ffn");
    const Status s = r->read(o.op);
    REQUIRE_FALSE(s.is_ok());
    CHECK(has(s.message(), path));
    CHECK(has(s.message(), "truncated"));
    CHECK(has(s.message(), "200000"));
    CHECK(o.op.data.empty());
  }
  SECTION("replaced") {
    auto r = open_or_fail(path, {});
    const std::string other = (dir / "new.gguf").string();
    write_random_file(other, 200000, 6);
    std::filesystem::rename(other, path);
    auto o = make_op(0, 1000);
    const Status s = r->read(o.op);
    REQUIRE_FALSE(s.is_ok());
    CHECK(has(s.message(), "replaced"));
  }
  SECTION("changed between model load and reader open") {
    auto id = FileIdentity::of_path(path);
    REQUIRE(id.is_ok());
    std::filesystem::resize_file(path, 150000);
    ReaderOptions o;
    o.expect = *id;
    auto r = BlockReader::open(path, o);
    REQUIRE_FALSE(r.is_ok());
    CHECK(has(r.message(), "truncated"));
  }
  SECTION("a range beyond the end") {
    auto r = open_or_fail(path, {});
    auto o = make_op(199000, 2000, "blk.3.attn");
    const Status s = r->read(o.op);
    REQUIRE_FALSE(s.is_ok());
    CHECK(has(s.message(), "beyond the end"));
    CHECK(has(s.message(), "blk.3.attn"));
  }
}

TEST_CASE("block reader: checksums and registered buffers", "[io]") {
  const auto dir = test::temp_dir("io-verify");
  const std::string path = (dir / "model.gguf").string();
  const auto file = write_random_file(path, 300000, 9);
  auto r = open_or_fail(path, {});
  auto o = make_op(4128, 100000, "blk.2.ffn");
  const uint32_t good = crc32c(std::span(file.data() + 4128, 100000));
  o.op.crc32c = good;
  REQUIRE(r->read(o.op).is_ok());
  o.op.crc32c = good ^ 1;  // what a flipped bit on disk would look like
  const Status s = r->read(o.op);
  REQUIRE_FALSE(s.is_ok());
  CHECK(has(s.message(), "checksum mismatch"));
  CHECK(has(s.message(), "blk.2.ffn"));
  CHECK(o.op.data.empty());

  // Registered (fixed) buffers give the same bytes; refusal is a notice, not a failure.
  auto big = AlignedBuffer::allocate(1 << 20);
  REQUIRE(big.is_ok());
  std::vector<std::span<uint8_t>> bufs{big->span()};
  const bool registered = r->register_buffers(bufs);
  if (!registered) CHECK(has(r->notice(), "registration refused"));
  ReadOp f;
  f.offset = 50001;
  f.bytes = 200000;
  f.buffer = big->span().subspan(8192);
  f.label = "fixed";
  REQUIRE(r->read(f).is_ok());
  CHECK(same(f.data, file, 50001));
  CHECK(f.data.size() == 200000);
}

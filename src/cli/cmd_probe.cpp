// strata probe [--out configs/hw/mine.toml] [--dir /path/on/nvme] [--quick]: measures this
// machine's rates into a hardware profile (offload/probe.h).
#include <chrono>
#include <cstdio>

#include "cli/command.h"
#include "core/log.h"
#include "offload/probe.h"

namespace strata::cli {
namespace {

struct ProbeArgs {
  std::string out, dir = "/var/tmp", name, io = "auto";
  bool quick = false;
};

int run_probe(const ProbeArgs& a) {
  offload::ProbeOptions opt;
  opt.dir = a.dir;
  opt.quick = a.quick;
  opt.io_backend = a.io;
  const auto t0 = std::chrono::steady_clock::now();
  opt.progress = [t0](const std::string& line) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "probe [%5.1f s] %s\n", s, line.c_str());
  };
  auto p = offload::probe(opt);
  if (!p) { log::error("probe: {}", p.message()); return 1; }
  if (!a.name.empty()) p->name = a.name;
  if (a.out.empty()) {
    std::printf("%s", offload::profile_to_toml(*p).c_str());
    return 0;
  }
  if (auto s = offload::save_profile(*p, a.out); !s) { log::error("{}", s.message()); return 1; }
  std::fprintf(stderr, "probe: wrote %s\n", a.out.c_str());
  return 0;
}

}  // namespace

Command add_probe(CLI::App& app) {
  auto a = std::make_shared<ProbeArgs>();
  auto* sub = app.add_subcommand("probe", "Measure this machine's rates into a hardware profile (TOML)");
  sub->add_option("-o,--out", a->out, "Write the profile here (default: print it)");
  sub->add_option("--dir", a->dir, "Folder on the disk to measure (a temp file is written there)");
  sub->add_option("--name", a->name, "Profile name");
  sub->add_flag("--quick", a->quick, "Fewer, smaller measurements");
  sub->add_option("--io", a->io, "Disk read backend: auto (io_uring, else a pread pool), io_uring, pread")
      ->check(CLI::IsMember({"auto", "io_uring", "pread"}))
      ->capture_default_str();
  return {sub, [a] { return run_probe(*a); }};
}

}  // namespace strata::cli

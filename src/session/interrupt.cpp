#include "session/interrupt.h"

#include <atomic>
#include <csignal>

namespace strata::session {
namespace {

std::atomic<int> g_signal{0};  // lock-free int: async-signal-safe to store

void on_signal(int sig) {
  int none = 0;
  g_signal.compare_exchange_strong(none, sig);
  // From now on the next SIGINT/SIGTERM takes the default action (terminate).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGINT, &dfl, nullptr);
  sigaction(SIGTERM, &dfl, nullptr);
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // reads/writes in progress complete instead of failing with EINTR
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool interrupted() { return g_signal.load(std::memory_order_relaxed) != 0; }
int interrupt_signal() { return g_signal.load(std::memory_order_relaxed); }
int interrupt_exit_code() {
  const int s = interrupt_signal();
  return s ? 128 + s : 0;
}

}  // namespace strata::session

// SIGINT/SIGTERM as a request to stop, not a kill: the handler only records the signal; work loops
// poll interrupted() at safe points (between decoded tokens, between jobs), finish what must be
// finished (flush partial output, complete a durable write) and exit with 128 + signal (130 for
// SIGINT, 143 for SIGTERM), as shells and schedulers expect. A second signal of either kind kills
// the process at once (default action) for a user who does not want to wait.
#pragma once

namespace strata::session {

void install_interrupt_handlers();
bool interrupted();
int interrupt_signal();      // 0 when none arrived
int interrupt_exit_code();   // 128 + signal; 0 when none arrived

}  // namespace strata::session

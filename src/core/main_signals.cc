// main_signals.h: the main thread's signals, passed on from threads that do not block them.
#include "core/main_signals.h"

#include <pthread.h>

namespace rankd {

namespace {

pthread_t g_main_thread;

void ForwardToMainThread(int sig) { pthread_kill(g_main_thread, sig); }  // async-signal-safe

}  // namespace

sigset_t TakeSignalsOnMainThread(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  g_main_thread = pthread_self();
  struct sigaction forward = {};
  forward.sa_handler = ForwardToMainThread;
  sigfillset(&forward.sa_mask);
  forward.sa_flags = SA_RESTART;
  for (int sig : signals) sigaction(sig, &forward, nullptr);
  return set;
}

}  // namespace rankd

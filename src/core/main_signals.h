// The signals a process's main thread waits for (sigwait, sigwaitinfo, sigtimedwait): blocked
// on the main thread before it starts any thread, so that every thread it starts inherits
// the mask, and given a handler that passes them on to the main thread.
//
// Why the handler: a thread a library started before main (OpenBLAS's pool, when the BLAS
// faiss calls is OpenBLAS) did not inherit the mask, and the kernel may hand it a
// process-directed signal, whose default action (SIGHUP, SIGTERM, SIGINT) ends the process.
// The handler only ever runs on such a thread: it sends the signal to the main thread,
// where it stays pending until the wait takes it.
//
// Threads: the main thread, once, before it starts any thread.
#pragma once

#include <signal.h>

#include <initializer_list>

namespace rankd {

// Blocks `signals` on the calling (main) thread, forwards them from any other thread, and
// returns the set to wait on.
sigset_t TakeSignalsOnMainThread(std::initializer_list<int> signals);

}  // namespace rankd

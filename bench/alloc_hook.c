// LD_PRELOAD allocation counter for `ops/bench alloc` (bench/alloc.sh).
//
// Interposes malloc, calloc, realloc, reallocarray, free, posix_memalign, aligned_alloc,
// memalign, valloc and pvalloc and forwards each to glibc's own (__libc_malloc & co.:
// no dlsym, which itself calls calloc). libstdc++'s operator new calls malloc, so C++
// allocations are counted too (bench/alloc_hook_check.cc checks that).
//
// The counters live in a file mapped MAP_SHARED (env RANKD_ALLOC_COUNT_FILE), so a
// benchmark reads them from outside without asking the process anything (an HTTP
// /metrics scrape would allocate). Layout, all little-endian uint64 (bench/alloc_count.py
// reads it): a header, kSlots counter slots, and the call-site table.
//   slot 0: shared by threads past kSlots - 1 (atomic adds);
//   slot i > 0: owned by one thread, the only writer (relaxed loads and stores: plain
//   moves, no locked instruction and no cache line shared with another thread).
// Each slot: allocations by kind (malloc, calloc, realloc incl. reallocarray, aligned),
// frees, and bytes requested (realloc: the new size).
//
// RANKD_ALLOC_SITES=N (N > 0): also samples one allocation in N on average (per thread,
// random strides so that a periodic pattern is not always sampled at the same site) and
// counts its backtrace() in an open-addressed table of the same file, filled lock-free.
// The table is read live (or after exit); /proc/PID/maps, for symbolising, is copied to
// RANKD_ALLOC_COUNT_FILE.maps at start and at exit.
//
// Threads: every function here may be called from any thread, at any time, including
// before the constructor ran (counts of that time go to a static slot, not the file).
#define _GNU_SOURCE
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void __libc_free(void* p);
void* __libc_memalign(size_t alignment, size_t size);
void* __libc_valloc(size_t size);
void* __libc_pvalloc(size_t size);

#define EXPORT __attribute__((visibility("default")))
// Initial-exec TLS: no __tls_get_addr call (which may allocate) on first use.
#define TLS __thread __attribute__((tls_model("initial-exec")))

enum { kMalloc, kCalloc, kRealloc, kAligned, kFree, kBytes, kSlotWords = 8 };
enum { kSlots = 256, kSiteFrames = 20, kSiteCapacity = 16384 };
#define MAGIC 0x31434f4c4c414b52ull  // "RKALLOC1"

typedef struct {
  _Atomic uint64_t w[kSlotWords];
} Slot;  // one cache line

typedef struct {
  uint64_t magic, version, pid, sample_every;
  _Atomic uint64_t slots_used, sites_used, sites_dropped, samples;
} Header;  // one cache line

typedef struct {
  _Atomic uint64_t key;    // stack hash; 0 = free
  _Atomic uint64_t count;  // samples of this stack
  _Atomic uint64_t bytes;  // bytes requested by those samples
  _Atomic uint64_t depth;  // frames[] filled and visible once non-zero
  uint64_t frames[kSiteFrames];
} Site;

typedef struct {
  Header h;
  Slot slots[kSlots];
  Site sites[kSiteCapacity];
} Layout;

static Layout* g_layout;  // set once by the constructor, then read-only
static Slot g_early;      // counts before the file is mapped (or without one)
static uint64_t g_sample_every;
static char g_maps_path[4096];

static TLS Slot* t_slot;
static TLS int t_in_sampler;  // backtrace() may call back into malloc
static TLS int64_t t_until_sample;
static TLS uint64_t t_rng;

static Slot* MySlot(void) {
  if (t_slot) return t_slot;
  Layout* l = __atomic_load_n(&g_layout, __ATOMIC_ACQUIRE);
  if (!l) return &g_early;
  uint64_t i = atomic_fetch_add_explicit(&l->h.slots_used, 1, memory_order_relaxed) + 1;
  t_slot = i < kSlots ? &l->slots[i] : &l->slots[0];
  return t_slot;
}

static void Bump(Slot* s, int word, uint64_t by) {
  if (s == &g_early || (g_layout && s == &g_layout->slots[0])) {
    atomic_fetch_add_explicit(&s->w[word], by, memory_order_relaxed);
  } else {  // the owner is the only writer: a relaxed load + store is enough
    uint64_t v = atomic_load_explicit(&s->w[word], memory_order_relaxed);
    atomic_store_explicit(&s->w[word], v + by, memory_order_relaxed);
  }
}

static uint64_t NextRandom(void) {  // xorshift64*, per thread
  if (t_rng == 0) t_rng = (uint64_t)(uintptr_t)&t_rng * 0x9E3779B97F4A7C15ull | 1;
  t_rng ^= t_rng >> 12;
  t_rng ^= t_rng << 25;
  t_rng ^= t_rng >> 27;
  return t_rng * 0x2545F4914F6CDD1Dull;
}

static void Sample(size_t bytes) {
  Layout* l = g_layout;
  if (!l || t_in_sampler) return;
  if (--t_until_sample > 0) return;
  t_until_sample = (int64_t)(1 + NextRandom() % (2 * g_sample_every - 1));  // mean N
  t_in_sampler = 1;
  // The first frames are this file's own (how many depends on inlining): the reader
  // drops the frames of this shared object.
  void* f[kSiteFrames];
  int n = backtrace(f, kSiteFrames);
  t_in_sampler = 0;
  uint64_t key = 1469598103934665603ull;  // FNV-1a over the addresses
  for (int i = 0; i < n; ++i) key = (key ^ (uint64_t)(uintptr_t)f[i]) * 1099511628211ull;
  if (key == 0) key = 1;
  atomic_fetch_add_explicit(&l->h.samples, 1, memory_order_relaxed);
  for (uint64_t probe = 0; probe < 64; ++probe) {
    Site* s = &l->sites[(key + probe) % kSiteCapacity];
    uint64_t k = atomic_load_explicit(&s->key, memory_order_acquire);
    if (k == 0) {
      uint64_t expected = 0;
      if (atomic_compare_exchange_strong(&s->key, &expected, key)) {
        for (int i = 0; i < n; ++i) s->frames[i] = (uint64_t)(uintptr_t)f[i];
        atomic_store_explicit(&s->depth, (uint64_t)(n > 0 ? n : 1), memory_order_release);
        atomic_fetch_add_explicit(&l->h.sites_used, 1, memory_order_relaxed);
        k = key;
      } else {
        k = expected;
      }
    }
    if (k == key) {
      atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
      atomic_fetch_add_explicit(&s->bytes, bytes, memory_order_relaxed);
      return;
    }
  }
  atomic_fetch_add_explicit(&l->h.sites_dropped, 1, memory_order_relaxed);
}

static void Counted(int kind, size_t bytes) {
  Slot* s = MySlot();
  Bump(s, kind, 1);
  Bump(s, kBytes, bytes);
  if (g_sample_every) Sample(bytes);
}

// Copies /proc/self/maps to g_maps_path with read/write only (no stdio: it allocates).
static void CopyMaps(void) {
  if (!g_maps_path[0]) return;
  int in = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  int out = open(g_maps_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  char buf[4096];
  ssize_t got;
  while (in >= 0 && out >= 0 && (got = read(in, buf, sizeof buf)) > 0) {
    if (write(out, buf, (size_t)got) != got) break;
  }
  if (in >= 0) close(in);
  if (out >= 0) close(out);
}

__attribute__((constructor)) static void AllocHookInit(void) {
  const char* path = getenv("RANKD_ALLOC_COUNT_FILE");
  const char* every = getenv("RANKD_ALLOC_SITES");
  void* mem = MAP_FAILED;
  if (path && *path) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0 && ftruncate(fd, sizeof(Layout)) == 0) {
      mem = mmap(NULL, sizeof(Layout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    if (fd >= 0) close(fd);
    size_t len = strlen(path);
    if (len + sizeof ".maps" <= sizeof g_maps_path) {
      memcpy(g_maps_path, path, len);
      memcpy(g_maps_path + len, ".maps", sizeof ".maps");
    }
  }
  if (mem == MAP_FAILED) {  // no file: count into private memory, read by nobody
    mem = mmap(NULL, sizeof(Layout), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return;
  }
  Layout* l = mem;
  l->h.magic = MAGIC;
  l->h.version = 1;
  l->h.pid = (uint64_t)getpid();
  if (every && atoll(every) > 0) {
    // backtrace() loads libgcc's unwinder on first use, which allocates: do it now,
    // outside any malloc of the program's.
    void* warm[4];
    t_in_sampler = 1;
    backtrace(warm, 4);
    t_in_sampler = 0;
    l->h.sample_every = g_sample_every = (uint64_t)atoll(every);
  }
  __atomic_store_n(&g_layout, l, __ATOMIC_RELEASE);
  CopyMaps();
}

__attribute__((destructor)) static void AllocHookFini(void) { CopyMaps(); }

EXPORT void* malloc(size_t size) {
  Counted(kMalloc, size);
  return __libc_malloc(size);
}

EXPORT void* calloc(size_t n, size_t size) {
  size_t bytes;
  Counted(kCalloc, __builtin_mul_overflow(n, size, &bytes) ? SIZE_MAX : bytes);
  return __libc_calloc(n, size);
}

EXPORT void* realloc(void* p, size_t size) {
  Counted(kRealloc, size);
  return __libc_realloc(p, size);
}

EXPORT void* reallocarray(void* p, size_t n, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(n, size, &bytes)) {
    errno = ENOMEM;
    return NULL;
  }
  Counted(kRealloc, bytes);
  return __libc_realloc(p, bytes);
}

EXPORT void free(void* p) {
  if (p) Bump(MySlot(), kFree, 1);
  __libc_free(p);
}

EXPORT void* memalign(size_t alignment, size_t size) {
  Counted(kAligned, size);
  return __libc_memalign(alignment, size);
}

EXPORT void* aligned_alloc(size_t alignment, size_t size) {
  Counted(kAligned, size);
  return __libc_memalign(alignment, size);
}

EXPORT int posix_memalign(void** out, size_t alignment, size_t size) {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0 || alignment == 0) {
    return EINVAL;
  }
  Counted(kAligned, size);
  void* p = __libc_memalign(alignment, size);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

EXPORT void* valloc(size_t size) {
  Counted(kAligned, size);
  return __libc_valloc(size);
}

EXPORT void* pvalloc(size_t size) {
  Counted(kAligned, size);
  return __libc_pvalloc(size);
}

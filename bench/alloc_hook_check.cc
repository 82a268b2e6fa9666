// Self-check of bench/alloc_hook.c, run by bench/alloc.sh under the hook before it
// measures anything: a known number of each kind of allocation, C++ ones included
// (libstdc++'s operator new, plain and aligned, must reach the interposed malloc /
// aligned functions). bench/alloc_count.py check then compares the counts with these.
// Single-threaded.
#include <cstdlib>
#include <new>
#include <string>

namespace {

constexpr int kEach = 100000;  // per kind; alloc_count.py expects this number
void* keep[kEach];

// Keeps the compiler from eliding an allocation it can see is unused.
void Escape(void* p) { asm volatile("" : : "r"(p) : "memory"); }

template <typename Alloc, typename Free>
void Times(Alloc alloc, Free release) {
  for (int i = 0; i < kEach; ++i) {
    keep[i] = alloc();
    Escape(keep[i]);
  }
  for (int i = 0; i < kEach; ++i) release(keep[i]);
}

}  // namespace

int main() {
  // malloc: 3 kEach (new, new[], malloc)
  Times([] { return static_cast<void*>(new int(1)); },
        [](void* p) { delete static_cast<int*>(p); });
  Times([] { return static_cast<void*>(new char[100]); },
        [](void* p) { delete[] static_cast<char*>(p); });
  Times([] { return std::malloc(24); }, [](void* p) { std::free(p); });
  // calloc: kEach; realloc: kEach (the first malloc counts as one more malloc)
  Times([] { return std::calloc(3, 8); }, [](void* p) { std::free(p); });
  void* r = std::malloc(1);
  for (int i = 0; i < kEach; ++i) {
    r = std::realloc(r, 1 + i % 4096);
    Escape(r);
  }
  std::free(r);
  // aligned: kEach (operator new with an alignment)
  Times([] { return ::operator new (64, std::align_val_t{64}); },
        [](void* p) { ::operator delete (p, std::align_val_t{64}); });
  return 0;
}

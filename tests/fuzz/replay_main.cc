// A main for a fuzz harness without libFuzzer: runs LLVMFuzzerTestOneInput once on each
// file named on the command line (folders: each file in them, sorted). This is how the
// normal build keeps every corpus entry a regression test (meson test fuzz_corpus) and
// how a crash file is replayed under a debugger or gcov (docs/fuzzing.md). No input at
// all fails (exit 1): a corpus folder moved, renamed or emptied must not pass as a
// corpus replayed.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    fs::path p(argv[i]);
    if (!fs::exists(p)) {
      std::fprintf(stderr, "no such file or folder: %s\n", p.c_str());
      return 2;
    }
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.push_back(p);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "%s: no input to replay (an empty or missing corpus)\n",
                 argc > 0 ? argv[0] : "replay");
    return 1;
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", f.c_str());
      return 2;
    }
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // A copy of exactly `size` bytes, so that ASan sees a read past the end.
    std::vector<uint8_t> data(bytes.begin(), bytes.end());
    LLVMFuzzerTestOneInput(data.data(), data.size());
  }
  std::printf("%s: %zu input(s) replayed\n", argc > 0 ? argv[0] : "replay", files.size());
  return 0;
}

// Runs a libFuzzer target's entry point over files and folders of inputs, so that a
// fuzz target is built and its seed corpus exercised in the normal build (and under
// ASan) without libFuzzer. Usage: fuzz_replay PATH... (files, or folders of files).
// Exits 1 when a path cannot be read or holds no input; a failing input traps.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    if (std::filesystem::is_directory(argv[i], ec)) {
      for (const auto& e : std::filesystem::directory_iterator(argv[i], ec))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.emplace_back(argv[i]);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "fuzz_replay: no inputs\n");
    return 1;
  }
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "fuzz_replay: cannot read %s\n", f.c_str());
      return 1;
    }
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    // Every input again with each cut point a connection could see (up to 512 bytes in).
    for (size_t cut = 1; cut < bytes.size() && cut < 512; ++cut) {
      std::string split;
      split.push_back(1);                                    // one piece length...
      split.push_back(static_cast<char>((cut - 1) & 0xff));  // ...of cut bytes, in turn
      size_t skip = 1 + (static_cast<uint8_t>(bytes[0]) & 7);
      if (skip > bytes.size()) break;
      split.append(bytes, skip, std::string::npos);
      if (cut > 256) break;
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(split.data()), split.size());
    }
  }
  std::printf("fuzz_replay: %zu inputs ok\n", files.size());
  return 0;
}

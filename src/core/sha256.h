// SHA-256 (FIPS 180-4) of a byte string, as lower-case hex: identifies a model file's
// exact bytes in GET /plans and the explain output.
//
// Threads: any thread; Sha256 objects are not shared.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rankd {

// Incremental hasher: Update any number of times, then Final once.
class Sha256 {
 public:
  Sha256();
  void Update(std::string_view bytes);
  // The digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> Final();

 private:
  void Block(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// The digest of `bytes` as 64 lower-case hex digits.
std::string Sha256Hex(std::string_view bytes);

}  // namespace rankd

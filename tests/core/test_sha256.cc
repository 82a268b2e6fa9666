// SHA-256: the FIPS 180-4 test vectors, and incremental updates equal to one update.
#include <doctest/doctest.h>

#include <string>

#include "core/sha256.h"

using rankd::Sha256Hex;

TEST_SUITE("sha256") {
  TEST_CASE("FIPS 180-4 vectors") {
    CHECK(Sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(Sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK(Sha256Hex(std::string(1'000'000, 'a')) ==
          "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  }

  TEST_CASE("padding edges: 55, 56, 63, 64 and 65 bytes") {
    // Reference digests from coreutils' sha256sum.
    CHECK(Sha256Hex(std::string(55, 'x')) ==
          "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072");
    CHECK(Sha256Hex(std::string(56, 'x')) ==
          "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e");
    CHECK(Sha256Hex(std::string(63, 'x')) ==
          "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2");
    CHECK(Sha256Hex(std::string(64, 'x')) ==
          "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c");
    CHECK(Sha256Hex(std::string(65, 'x')) ==
          "9537c5fdf120482f7d58d25e9ed583f52c02b4e304ea814db1633ad565aed7e9");
  }

  TEST_CASE("updates in pieces equal one update") {
    std::string text;
    for (int i = 0; i < 1000; ++i) text += static_cast<char>(i * 7);
    for (size_t piece : {1, 3, 63, 64, 65, 200}) {
      rankd::Sha256 h;
      for (size_t at = 0; at < text.size(); at += piece)
        h.Update(std::string_view(text).substr(at, piece));
      rankd::Sha256 whole;
      whole.Update(text);
      CHECK(h.Final() == whole.Final());
    }
  }
}

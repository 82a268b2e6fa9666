// Page cursors (rank/page_cursor.h): what is sealed opens back, for its plan and user
// only; every single-character change of a cursor fails; key files shorter than 32
// bytes are refused.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "rank/page_cursor.h"

using namespace rankd;

namespace {

PageCursor Sample() {
  PageCursor c;
  for (size_t i = 0; i < c.snapshot.size(); ++i) c.snapshot[i] = static_cast<uint8_t>(i * 17 + 3);
  c.offset = 20;
  c.byte_start = 1234;
  c.header_bytes = 80;
  c.items = 500;
  c.bytes = 25000;
  c.max_item_bytes = 61;
  c.page_size = 20;
  return c;
}

std::string KeyFile(const std::string& bytes) {
  std::string path = "/tmp/rankd-test-cursor-key-" + std::to_string(::getpid()) + "-" +
                     std::to_string(bytes.size());
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

}  // namespace

TEST_SUITE("page_cursor") {
  TEST_CASE("a sealed cursor opens for its plan and user only") {
    auto key = CursorKey::Random();
    PageCursor c = Sample();
    std::string text = key->Seal(c, "feed", UserId(42));
    CHECK(text.size() == 100);
    CHECK(text.find_first_not_of(
              "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") ==
          std::string::npos);
    auto back = key->Open(text, "feed", UserId(42));
    REQUIRE(back.has_value());
    CHECK(back->snapshot == c.snapshot);
    CHECK(back->offset == 20);
    CHECK(back->byte_start == 1234);
    CHECK(back->header_bytes == 80);
    CHECK(back->items == 500);
    CHECK(back->bytes == 25000);
    CHECK(back->max_item_bytes == 61);
    CHECK(back->page_size == 20);
    for (auto [plan, user] : {std::pair<std::string, UserId>{"feed", UserId(43)},
                              {"feed2", UserId(42)},
                              {"fee", UserId(42)},
                              {"feed", UserId::Str("42")}}) {
      auto other = key->Open(text, plan, user);
      REQUIRE_FALSE(other.has_value());
      CHECK(other.error().code == ErrorCode::kInvalidCursor);
    }
    // Another process's random key.
    CHECK_FALSE(CursorKey::Random()->Open(text, "feed", UserId(42)).has_value());
    // String user ids are bound as strings.
    std::string s = key->Seal(c, "market", UserId::Str("acct-1"));
    CHECK(key->Open(s, "market", UserId::Str("acct-1")).has_value());
    CHECK_FALSE(key->Open(s, "market", UserId::Str("acct-2")).has_value());
  }

  TEST_CASE("every one-character change fails") {
    auto key = CursorKey::Random();
    std::string text = key->Seal(Sample(), "feed", UserId(7));
    for (size_t i = 0; i < text.size(); ++i) {
      std::string bad = text;
      bad[i] = bad[i] == 'A' ? 'B' : 'A';
      auto r = key->Open(bad, "feed", UserId(7));
      CHECK_MESSAGE(!r.has_value(), "position " << i);
      if (!r) CHECK(r.error().code == ErrorCode::kInvalidCursor);
    }
    CHECK_FALSE(key->Open(text.substr(1), "feed", UserId(7)).has_value());
    CHECK_FALSE(key->Open(text + "A", "feed", UserId(7)).has_value());
    CHECK_FALSE(key->Open("", "feed", UserId(7)).has_value());
    CHECK_FALSE(key->Open(std::string(100, '='), "feed", UserId(7)).has_value());
  }

  TEST_CASE("key files: every byte counts, at least 32") {
    std::string path = KeyFile(std::string(32, 'k'));
    auto a = CursorKey::Load(path);
    REQUIRE(a.has_value());
    std::string path2 = KeyFile(std::string(32, 'k') + "\n");
    auto b = CursorKey::Load(path2);
    REQUIRE(b.has_value());
    std::string text = (*a)->Seal(Sample(), "feed", UserId(1));
    CHECK((*a)->Open(text, "feed", UserId(1)).has_value());
    CHECK_FALSE((*b)->Open(text, "feed", UserId(1)).has_value());
    std::string short_path = KeyFile(std::string(31, 'k'));
    auto s = CursorKey::Load(short_path);
    REQUIRE_FALSE(s.has_value());
    CHECK(s.error().message.find("31 bytes") != std::string::npos);
    CHECK_FALSE(CursorKey::Load("/nonexistent/rankd-key").has_value());
    std::remove(path.c_str());
    std::remove(path2.c_str());
    std::remove(short_path.c_str());
  }
}  // TEST_SUITE

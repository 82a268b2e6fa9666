#include "rank/page_cursor.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/random_bytes.h"
#include "core/small_file.h"

namespace rankd {

namespace {

constexpr uint8_t kVersion = 1;
constexpr size_t kFieldBytes = 1 + 16 + 6 * 4 + 2;  // version, snapshot, six u32, u16
constexpr size_t kMacBytes = 32;
constexpr size_t kMaxFileBytes = 1 << 20;
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void PutU32(uint32_t v, std::string& out) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

uint32_t GetU32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// base64url (RFC 4648 §5) without padding.
std::string Base64Url(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    acc = acc << 8 | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kAlphabet[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += kAlphabet[(acc << (6 - bits)) & 63];
  return out;
}

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

// The bytes of base64url `text`; false on a character outside the alphabet.
bool FromBase64Url(std::string_view text, std::string& out) {
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v = Base64Value(c);
    if (v < 0) return false;
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return true;
}

Error Malformed() {
  return Error::InvalidCursor(
      "cursor: not a cursor this server issued (send back the \"cursor\" "
      "of the previous page as it came)");
}

}  // namespace

Result<std::shared_ptr<const CursorKey>> CursorKey::Load(const std::string& path) {
  auto read = ReadSmallFile(path, kMaxFileBytes, "key file");
  if (!read) return Fail(std::move(read.error()));
  std::string key = std::move(*read);
  if (key.size() < kMinBytes)
    return Fail(Error::BadRequest(path + " holds " + std::to_string(key.size()) +
                                  " bytes; a cursor key needs at least " +
                                  std::to_string(kMinBytes) + " (e.g. head -c 32 /dev/urandom)"));
  return std::shared_ptr<const CursorKey>(new CursorKey(std::move(key)));
}

std::shared_ptr<const CursorKey> CursorKey::Random() {
  std::string key(kMinBytes, '\0');
  FillRandom(key.data(), key.size());
  return std::shared_ptr<const CursorKey>(new CursorKey(std::move(key)));
}

// HMAC-SHA256 over the fields, the plan name (length first, so that no plan name and
// user id pair reads as another) and the user id (its kind, then its bytes).
CursorKey::Mac CursorKey::Sign(std::string_view fields, std::string_view plan,
                               const UserId& user) const {
  std::string msg;
  msg.reserve(fields.size() + 4 + plan.size() + 1 + 8 + user.str.size());
  msg.append(fields);
  PutU32(static_cast<uint32_t>(plan.size()), msg);
  msg.append(plan);
  if (user.is_str) {
    msg += 's';
    msg.append(user.str);
  } else {
    msg += 'i';
    auto n = static_cast<uint64_t>(user.num);
    PutU32(static_cast<uint32_t>(n), msg);
    PutU32(static_cast<uint32_t>(n >> 32), msg);
  }
  Mac mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac.data(), &len);
  return mac;
}

std::string CursorKey::Seal(const PageCursor& c, std::string_view plan, const UserId& user) const {
  std::string raw;
  raw.reserve(kFieldBytes + kMacBytes);
  raw += static_cast<char>(kVersion);
  raw.append(reinterpret_cast<const char*>(c.snapshot.data()), c.snapshot.size());
  for (uint32_t v : {c.offset, c.byte_start, c.header_bytes, c.items, c.bytes, c.max_item_bytes})
    PutU32(v, raw);
  raw += static_cast<char>(c.page_size & 0xff);
  raw += static_cast<char>(c.page_size >> 8);
  Mac mac = Sign(raw, plan, user);
  raw.append(reinterpret_cast<const char*>(mac.data()), mac.size());
  return Base64Url(raw);
}

std::string CursorKey::ChainTag(std::string_view plan, const UserId& user) const {
  // Its own first byte: no tag is ever the MAC of a cursor (whose fields start with
  // kVersion), so a tag read from Redis key names forges nothing.
  static constexpr char kTagFields[] =
      "\xff"
      "chain";
  Mac mac = Sign(std::string_view(kTagFields, sizeof kTagFields - 1), plan, user);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(32);
  for (size_t i = 0; i < 16; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 15];
  }
  return out;
}

Result<PageCursor> CursorKey::Open(std::string_view text, std::string_view plan,
                                   const UserId& user) const {
  std::string raw;
  raw.reserve(kFieldBytes + kMacBytes + 2);
  if (text.size() != ((kFieldBytes + kMacBytes) * 4 + 2) / 3 || !FromBase64Url(text, raw) ||
      raw.size() != kFieldBytes + kMacBytes || static_cast<uint8_t>(raw[0]) != kVersion)
    return Fail(Malformed());
  std::string_view fields(raw.data(), kFieldBytes);
  Mac mac = Sign(fields, plan, user);
  if (CRYPTO_memcmp(mac.data(), raw.data() + kFieldBytes, kMacBytes) != 0)
    return Fail(Error::InvalidCursor(
        "cursor: does not verify for this plan and user_id: it was altered, issued for "
        "another plan or user, or signed by a server with another --cursor-key-file"));
  const auto* p = reinterpret_cast<const uint8_t*>(raw.data()) + 1;
  PageCursor c;
  std::memcpy(c.snapshot.data(), p, c.snapshot.size());
  p += c.snapshot.size();
  for (uint32_t* v :
       {&c.offset, &c.byte_start, &c.header_bytes, &c.items, &c.bytes, &c.max_item_bytes}) {
    *v = GetU32(p);
    p += 4;
  }
  c.page_size = static_cast<uint16_t>(p[0] | p[1] << 8);
  // Signed by us, so these hold unless a server of another version issued it.
  if (c.offset >= c.items || c.header_bytes > c.byte_start || c.byte_start >= c.bytes ||
      c.max_item_bytes == 0 || c.page_size == 0)
    return Fail(Malformed());
  return c;
}

}  // namespace rankd

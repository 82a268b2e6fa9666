#include "redis/resp_scanner.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "core/parse_int.h"

namespace rankd {

namespace {

bool IsTypeByte(char c) { return c == '+' || c == '-' || c == ':' || c == '$' || c == '*'; }

std::string Hex(char c) {
  static const char kDigits[] = "0123456789abcdef";
  auto u = static_cast<unsigned char>(c);
  return std::string("0x") + kDigits[u >> 4] + kDigits[u & 15];
}

}  // namespace

Result<size_t> RespScanner::Fail(std::string why) {
  state_ = State::kFailed;
  return std::unexpected(Error::Backend(std::move(why)));
}

size_t RespScanner::Room() const {
  // Invariant: used_ + owed_ <= max_bytes, kept by Charge and the header checks.
  return static_cast<size_t>(limits_.max_bytes - used_ - owed_);
}

bool RespScanner::Charge(size_t n) {
  used_ += n;
  return used_ + owed_ <= limits_.max_bytes;
}

void RespScanner::EndElement(const char* at) {
  state_ = State::kType;
  while (depth_ > 0) {
    if (--open_[depth_ - 1].remaining > 0) return;
    --depth_;  // that array is complete, and is itself an element of its parent
  }
  ++completed_;
  if (ends_ != nullptr) ends_->push_back(static_cast<size_t>(at - base_));
  used_ = owed_ = elements_ = 0;
}

Status RespScanner::EndHeader(const char* at) {
  std::optional<int64_t> parsed = ParseStrictInt<int64_t>(std::string_view(header_, header_len_));
  if (!parsed)
    return std::unexpected(Error::Backend("protocol error: malformed number in a reply header"));
  const int64_t v = *parsed;
  if (!AcceptHeader(v, at)) return std::unexpected(HeaderError(v));
  return {};
}

// Runs for every header of every reply, so it only decides; HeaderError, off the hot
// path, says why. Both apply the same rules in the same order.
inline bool RespScanner::AcceptHeader(int64_t v, const char* at) {
  // -1 is nil; any other negative length is refused (RESP2 has no other).
  if (type_ == ':' || v == -1) {
    EndElement(at);
    return true;
  }
  if (v < -1) return false;
  const auto n = static_cast<uint64_t>(v);
  if (type_ == '$') {
    if (n > Room() || Room() - n < 2) return false;
    payload_left_ = n;
    state_ = n > 0 ? State::kPayload : State::kPayloadCr;
    return true;
  }
  // '*'
  if (n == 0) {
    EndElement(at);
    return true;
  }
  if (depth_ >= std::min(limits_.max_depth, kMaxDepth) ||
      n > limits_.max_elements - std::min(elements_, limits_.max_elements) || n > Room() / 3)
    return false;
  elements_ += n;
  owed_ += 3 * n;
  open_[depth_++] = {static_cast<int64_t>(n)};
  state_ = State::kType;
  return true;
}

Error RespScanner::HeaderError(int64_t v) const {
  if (v < -1) return Error::Backend("protocol error: negative length " + std::to_string(v));
  const auto n = static_cast<uint64_t>(v);
  auto limit = " (limit " + std::to_string(limits_.max_bytes) + " bytes per reply)";
  if (type_ == '$')
    return Error::Backend("reply over the size limit: a bulk string of " + std::to_string(n) +
                          " bytes announced with " + std::to_string(Room()) + " left" + limit);
  if (depth_ >= std::min(limits_.max_depth, kMaxDepth))
    return Error::Backend("reply nested too deep: more than " + std::to_string(limits_.max_depth) +
                          " arrays");
  if (n > limits_.max_elements - std::min(elements_, limits_.max_elements))
    return Error::Backend("reply over the element limit: an array of " + std::to_string(n) +
                          " elements announced (limit " + std::to_string(limits_.max_elements) +
                          " per reply)");
  return Error::Backend("reply over the size limit: an array of " + std::to_string(n) +
                        " elements announced with " + std::to_string(Room()) + " bytes left" +
                        limit);
}

Result<const char*> RespScanner::ScanWhole(const char* p, const char* const end) {
  auto fail = [this](std::string why) { return std::unexpected(Fail(std::move(why)).error()); };
  // Element after element while they are whole: most replies are arrays of short bulks,
  // so this loop, not the byte-wise states, sees nearly every byte.
  while (p < end && state_ == State::kType) {
    char c = *p;
    if (c != '$' && c != '*' && c != ':') return p;
    const char* q = p + 1;
    bool negative = q < end && *q == '-';
    if (negative) ++q;
    const char* digits = q;
    uint64_t v = 0;
    while (q < end && *q >= '0' && *q <= '9') v = v * 10 + static_cast<uint64_t>(*q++ - '0');
    // Anything unusual (a split line, a bad byte, no digits, a number of 19 digits or
    // more, which could overflow here) goes the byte-wise way, which parses it exactly
    // and says precisely what is wrong.
    if (q == digits || q - digits > 18 || end - q < 2 || q[0] != '\r' || q[1] != '\n') return p;
    if (depth_ > 0) owed_ -= 3;  // this element's reservation becomes real bytes
    if (!Charge(static_cast<size_t>(q + 2 - p)))
      return fail("reply over the size limit: header line");
    type_ = c;
    saw_cr_ = false;
    const int64_t value = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
    if (!AcceptHeader(value, q + 2)) return fail(HeaderError(value).message);
    p = q + 2;
    if (state_ == State::kPayload && static_cast<uint64_t>(end - p) >= payload_left_ + 2) {
      const char* crlf = p + payload_left_;
      if (crlf[0] != '\r' || crlf[1] != '\n')
        return fail("protocol error: bulk string not ended by CRLF");
      Charge(payload_left_ + 2);  // within the room checked at the header
      payload_left_ = 0;
      p = crlf + 2;
      EndElement(p);
    }
  }
  return p;
}

Result<size_t> RespScanner::Scan(std::string_view bytes, std::vector<size_t>* ends) {
  if (state_ == State::kFailed) return Fail("the reply stream failed earlier");
  completed_ = 0;
  base_ = bytes.data();
  ends_ = ends;
  if (ends != nullptr) ends->clear();
  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  while (p < end) {
    switch (state_) {
      case State::kType: {
        auto whole = ScanWhole(p, end);
        if (!whole) return std::unexpected(std::move(whole.error()));
        if (*whole != p) {
          p = *whole;
          break;
        }
        char c = *p++;
        if (!IsTypeByte(c)) return Fail("protocol error: unexpected reply type byte " + Hex(c));
        if (depth_ > 0) owed_ -= 3;  // this element's reservation becomes real bytes
        if (!Charge(1)) return Fail("reply over the size limit");
        type_ = c;
        header_len_ = 0;
        saw_cr_ = false;
        state_ = (c == '+' || c == '-') ? State::kSimple : State::kHeader;
        break;
      }
      case State::kHeader: {
        char c = *p++;
        if (!Charge(1)) return Fail("reply over the size limit: header line");
        if (saw_cr_) {
          if (c != '\n') return Fail("protocol error: CR without LF in a reply header");
          saw_cr_ = false;
          if (auto s = EndHeader(p); !s) return Fail(std::move(s.error().message));
        } else if (c == '\r') {
          saw_cr_ = true;
        } else if (header_len_ < kMaxHeaderChars &&
                   ((c >= '0' && c <= '9') || (c == '-' && header_len_ == 0))) {
          header_[header_len_++] = c;
        } else {
          return Fail("protocol error: malformed number in a reply header");
        }
        break;
      }
      case State::kSimple: {
        // Status and error text: the line ends at the first CRLF (a bare CR or LF is
        // text, as Redis's own reader takes it). Only counted here.
        auto* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
        const char* stop = nl != nullptr ? nl + 1 : end;
        if (!Charge(static_cast<size_t>(stop - p)))
          return Fail("reply over the size limit: a status or error line longer than " +
                      std::to_string(limits_.max_bytes) + " bytes");
        bool crlf = nl != nullptr && (nl > p ? nl[-1] == '\r' : saw_cr_);
        saw_cr_ = nl == nullptr && end[-1] == '\r';
        p = stop;
        if (crlf) EndElement(p);
        break;
      }
      case State::kPayload: {
        auto n =
            static_cast<size_t>(std::min<uint64_t>(payload_left_, static_cast<uint64_t>(end - p)));
        Charge(n);  // within the room checked at the header
        p += n;
        payload_left_ -= n;
        if (payload_left_ == 0) state_ = State::kPayloadCr;
        break;
      }
      case State::kPayloadCr:
      case State::kPayloadLf: {
        char c = *p++;
        Charge(1);
        bool cr = state_ == State::kPayloadCr;
        if (c != (cr ? '\r' : '\n')) return Fail("protocol error: bulk string not ended by CRLF");
        if (cr)
          state_ = State::kPayloadLf;
        else
          EndElement(p);
        break;
      }
      case State::kFailed: return Fail("the reply stream failed earlier");
    }
  }
  return completed_;
}

}  // namespace rankd

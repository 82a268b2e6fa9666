#include "api/json_body.h"

#include <unordered_set>

#include "core/client_text.h"

namespace rankd {

using simdjson::dom::element;
using simdjson::dom::element_type;

namespace {

// Objects of up to 8 keys are checked pair by pair, larger ones with a set: linear in
// the body's size either way.
Status NoDuplicateKeys(element e) {
  if (e.type() == element_type::ARRAY) {
    for (element item : simdjson::dom::array(e))
      if (auto st = NoDuplicateKeys(item); !st) return st;
    return {};
  }
  if (e.type() != element_type::OBJECT) return {};
  simdjson::dom::object obj(e);
  auto duplicate = [](std::string_view key) {
    return Fail(Error::BadRequest("duplicate key '" + ClientText(key, 64) + "' in the body"));
  };
  if (obj.size() <= 8) {
    std::string_view keys[8];
    size_t n = 0;
    for (auto [key, value] : obj) {
      for (size_t i = 0; i < n; ++i)
        if (keys[i] == key) return duplicate(key);
      keys[n++] = key;
    }
  } else {
    std::unordered_set<std::string_view> keys;
    keys.reserve(obj.size());
    for (auto [key, value] : obj)
      if (!keys.insert(key).second) return duplicate(key);
  }
  for (auto [key, value] : obj)
    if (auto st = NoDuplicateKeys(value); !st) return st;
  return {};
}

}  // namespace

std::string ShortJson(element v) { return ClientText(simdjson::to_string(v), 64); }

Result<simdjson::dom::object> ParseJsonObjectBody(std::string_view body) {
  thread_local simdjson::dom::parser parser;
  element root;
  // An empty view may have a null data(), which simdjson would hand to memcpy.
  if (body.empty())
    return Fail(Error::BadRequest(std::string("invalid JSON: ") +
                                  simdjson::error_message(simdjson::EMPTY)));
  if (auto err = parser.parse(body.data(), body.size()).get(root))
    return Fail(Error::BadRequest(std::string("invalid JSON: ") + simdjson::error_message(err)));
  simdjson::dom::object obj;
  if (root.get_object().get(obj)) return Fail(Error::BadRequest("the body must be a JSON object"));
  if (auto st = NoDuplicateKeys(root); !st) return Fail(st.error());
  return obj;
}

}  // namespace rankd

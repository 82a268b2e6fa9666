#include "redis/reader.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstddef>
#include <new>

namespace rankd {

namespace {

// A top-level reply. Its first members mirror redisReply's (type, integer, len, str,
// elements, element) because hiredis reads one reply itself: an error that arrives with
// no callback waiting, whose str it copies before disconnecting.
struct RootReply {
  int type = REDIS_REPLY_NIL;
  long long integer = 0;
  size_t len = 0;
  char* str = nullptr;
  size_t elements = 0;
  void** element = nullptr;
  RedisReply value;
};
static_assert(offsetof(RootReply, type) == offsetof(redisReply, type));
static_assert(offsetof(RootReply, integer) == offsetof(redisReply, integer));
static_assert(offsetof(RootReply, len) == offsetof(redisReply, len));
static_assert(offsetof(RootReply, str) == offsetof(redisReply, str));
static_assert(offsetof(RootReply, elements) == offsetof(redisReply, elements));
static_assert(offsetof(RootReply, element) == offsetof(redisReply, element));

// The RedisReply a task's object stands for: roots return a RootReply*, children a
// pointer to their slot inside the parent's elements.
RedisReply* ValueOf(const redisReadTask* task) {
  if (task->parent == nullptr) return &static_cast<RootReply*>(task->obj)->value;
  return static_cast<RedisReply*>(task->obj);
}

// Places a new value for `task`; returns the object hiredis keeps for it, or nullptr
// (hiredis then fails the reply with an out-of-memory error).
//
// Children are appended as they arrive (hiredis builds them in order), not reserved up
// front from the array's announced count: a count is a promise the bytes have not kept
// yet. Appending may move earlier siblings, which is safe because hiredis keeps the
// object only of the arrays still being filled: the parent (the last element of its own
// parent, so it never moves while it fills) and its ancestors.
void* Place(const redisReadTask* task, RedisReply** out) {
  if (task->parent != nullptr) {
    RedisReply* parent = ValueOf(task->parent);
    if (static_cast<size_t>(task->idx) != parent->elements.size()) return nullptr;
    parent->elements.emplace_back();
    *out = &parent->elements.back();
    return *out;
  }
  auto* root = new (std::nothrow) RootReply;
  if (root == nullptr) return nullptr;
  root->type = task->type;
  *out = &root->value;
  return root;
}

// The hooks are called from C: no exception may leave them. bad_alloc (or length_error
// from a huge count that slipped past the scanner) becomes nullptr, which hiredis turns
// into an error on the connection.
template <class F>
void* NoThrow(F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    return nullptr;
  }
}

void* CreateString(const redisReadTask* task, char* str, size_t len) {
  return NoThrow([&]() -> void* {
    RedisReply* v = nullptr;
    void* obj = Place(task, &v);
    if (obj == nullptr) return nullptr;
    v->kind = task->type == REDIS_REPLY_ERROR    ? RedisReply::Kind::kError
              : task->type == REDIS_REPLY_STATUS ? RedisReply::Kind::kStatus
                                                 : RedisReply::Kind::kString;
    if (task->parent == nullptr) {
      auto* root = static_cast<RootReply*>(obj);
      try {
        v->str.assign(str, len);
      } catch (...) {
        delete root;  // hiredis never saw it
        throw;
      }
      root->str = v->str.data();
      root->len = v->str.size();
    } else {
      v->str.assign(str, len);  // on failure the slot stays, freed with its root
    }
    return obj;
  });
}

// Reserve at most this many elements up front; more grow as they arrive.
constexpr int kMaxReserve = 1024;

void* CreateArray(const redisReadTask* task, int elements) {
  return NoThrow([&]() -> void* {
    RedisReply* v = nullptr;
    void* obj = Place(task, &v);
    if (obj == nullptr) return nullptr;
    v->kind = RedisReply::Kind::kArray;
    if (elements > 0) {
      try {
        v->elements.reserve(static_cast<size_t>(std::min(elements, kMaxReserve)));
      } catch (...) {
        if (task->parent == nullptr) delete static_cast<RootReply*>(obj);
        throw;
      }
    }
    if (task->parent == nullptr)
      static_cast<RootReply*>(obj)->elements = static_cast<size_t>(std::max(elements, 0));
    return obj;
  });
}

void* CreateInteger(const redisReadTask* task, long long value) {
  return NoThrow([&]() -> void* {
    RedisReply* v = nullptr;
    void* obj = Place(task, &v);
    if (obj == nullptr) return nullptr;
    v->kind = RedisReply::Kind::kInteger;
    v->integer = value;
    if (task->parent == nullptr) static_cast<RootReply*>(obj)->integer = value;
    return obj;
  });
}

void* CreateNil(const redisReadTask* task) {
  return NoThrow([&]() -> void* {
    RedisReply* v = nullptr;
    void* obj = Place(task, &v);
    if (obj == nullptr) return nullptr;
    v->kind = RedisReply::Kind::kNil;
    return obj;
  });
}

// hiredis frees only top-level objects (children belong to their root).
void FreeObject(void* obj) noexcept { delete static_cast<RootReply*>(obj); }

redisReplyObjectFunctions kBuilders = {CreateString, CreateArray, CreateInteger, CreateNil,
                                       FreeObject};

}  // namespace

redisReplyObjectFunctions* RedisReplyBuilders() { return &kBuilders; }

RedisReply& TakeReply(void* reply) { return static_cast<RootReply*>(reply)->value; }

}  // namespace rankd

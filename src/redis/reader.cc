#include "redis/reader.h"

#include <hiredis/hiredis.h>

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
// pointer to their slot inside the parent's elements (reserved in full by CreateArray,
// so the slots never move).
RedisReply* ValueOf(const redisReadTask* task) {
  if (task->parent == nullptr) return &static_cast<RootReply*>(task->obj)->value;
  return static_cast<RedisReply*>(task->obj);
}

// Places a new value for `task`; returns the object hiredis keeps for it.
void* Place(const redisReadTask* task, RedisReply** out) {
  if (task->parent != nullptr) {
    RedisReply* parent = ValueOf(task->parent);
    *out = &parent->elements[static_cast<size_t>(task->idx)];
    return *out;
  }
  auto* root = new (std::nothrow) RootReply;
  if (root == nullptr) return nullptr;
  root->type = task->type;
  *out = &root->value;
  return root;
}

void* CreateString(const redisReadTask* task, char* str, size_t len) {
  RedisReply* v = nullptr;
  void* obj = Place(task, &v);
  if (obj == nullptr) return nullptr;
  v->kind = task->type == REDIS_REPLY_ERROR    ? RedisReply::Kind::kError
            : task->type == REDIS_REPLY_STATUS ? RedisReply::Kind::kStatus
                                               : RedisReply::Kind::kString;
  v->str.assign(str, len);
  if (task->parent == nullptr) {
    auto* root = static_cast<RootReply*>(obj);
    root->str = v->str.data();
    root->len = v->str.size();
  }
  return obj;
}

void* CreateArray(const redisReadTask* task, int elements) {
  RedisReply* v = nullptr;
  void* obj = Place(task, &v);
  if (obj == nullptr) return nullptr;
  v->kind = RedisReply::Kind::kArray;
  if (elements > 0) v->elements.resize(static_cast<size_t>(elements));
  if (task->parent == nullptr) static_cast<RootReply*>(obj)->elements = static_cast<size_t>(elements);
  return obj;
}

void* CreateInteger(const redisReadTask* task, long long value) {
  RedisReply* v = nullptr;
  void* obj = Place(task, &v);
  if (obj == nullptr) return nullptr;
  v->kind = RedisReply::Kind::kInteger;
  v->integer = value;
  if (task->parent == nullptr) static_cast<RootReply*>(obj)->integer = value;
  return obj;
}

void* CreateNil(const redisReadTask* task) {
  RedisReply* v = nullptr;
  void* obj = Place(task, &v);
  if (obj == nullptr) return nullptr;
  v->kind = RedisReply::Kind::kNil;
  return obj;
}

// hiredis frees only top-level objects (children belong to their root).
void FreeObject(void* obj) { delete static_cast<RootReply*>(obj); }

redisReplyObjectFunctions kBuilders = {CreateString, CreateArray, CreateInteger, CreateNil,
                                       FreeObject};

}  // namespace

redisReplyObjectFunctions* RedisReplyBuilders() { return &kBuilders; }

RedisReply& TakeReply(void* reply) { return static_cast<RootReply*>(reply)->value; }

}  // namespace rankd

#include "redis/tracker.h"

#include "core/log.h"
#include "redis/command.h"

namespace rankd {

namespace {
constexpr std::string_view kChannel = "__redis__:invalidate";
}  // namespace

RedisTracker::RedisTracker(EventLoop& loop, const RedisEndpoint& endpoint,
                           const RedisClientOptions& opts, RedisStats& stats,
                           const TrackingConfig& config, std::function<void()> on_change)
    : loop_(loop),
      endpoint_(endpoint),
      config_(config),
      sink_(config.sink),
      on_change_(std::move(on_change)) {
  loop_.AssertInLoopThread();
  uint64_t seed = reinterpret_cast<uintptr_t>(this);
  conn_ = std::make_unique<RedisConnection>(
      loop_, endpoint_, opts, stats, [this] { OnConnectionChange(); }, seed);
}

RedisTracker::~RedisTracker() {
  Close();
  *alive_ = false;
}

void RedisTracker::Start() { conn_->Start(); }

void RedisTracker::Close() {
  if (conn_->state() == RedisConnection::State::kClosed) return;
  conn_->Close();
}

void RedisTracker::SetId(int64_t id) {
  if (id == id_) return;
  id_ = id;
  on_change_();
}

void RedisTracker::OnConnectionChange() {
  if (!conn_->live()) {
    step_ = Step::kDown;
    pending_id_ = 0;
    SetId(0);
    return;
  }
  if (step_ != Step::kDown) return;
  // Fresh connection, handshake done: ask who we are; the rest follows from the answer.
  // Every reply from now on arrives as a push.
  conn_->EnterPushMode(this);
  RedisCommand id{"CLIENT", "ID"};
  if (!conn_->SendNoReply(id.wire())) return;  // going down
  step_ = Step::kAwaitId;
}

void RedisTracker::Misbehaved(std::string why) {
  step_ = Step::kDown;
  SetId(0);
  loop_.Defer([this, alive = alive_, why = std::move(why)]() mutable {
    if (*alive) conn_->Drop("invalidation connection: " + why);
  });
}

void RedisTracker::OnPush(RespView reply) {
  switch (step_) {
    case Step::kDown: return;  // after Misbehaved, until the drop
    case Step::kAwaitId:
      if (!reply.is_integer() || reply.integer() <= 0)
        return Misbehaved("CLIENT ID answered a " + std::string(RespKindName(reply.kind())));
      pending_id_ = reply.integer();
      if (config_.mode == TrackingMode::kBcast) {
        RedisCommand on{"CLIENT", "TRACKING", "ON", "REDIRECT"};
        on.Arg(pending_id_).Arg("BCAST");
        for (const auto& p : config_.bcast_prefixes) on.Arg("PREFIX").Key(endpoint_.prefix, p);
        if (!conn_->SendNoReply(on.wire())) return;
        step_ = Step::kAwaitTracking;
      } else {
        step_ = Step::kAwaitSubscribed;
      }
      {
        RedisCommand sub{"SUBSCRIBE", kChannel};
        conn_->SendNoReply(sub.wire());  // false: going down, and the change says so
      }
      return;
    case Step::kAwaitTracking:
      if (reply.is_error())
        return Misbehaved("CLIENT TRACKING failed: " + std::string(reply.str()));
      step_ = Step::kAwaitSubscribed;
      return;
    case Step::kAwaitSubscribed:
      if (!reply.is_array() || reply.size() != 3 || reply.At(0).str() != "subscribe")
        return Misbehaved(reply.is_error() ? "SUBSCRIBE failed: " + std::string(reply.str())
                                           : "SUBSCRIBE answered an unexpected reply");
      step_ = Step::kListening;
      SetId(pending_id_);
      return;
    case Step::kListening:
      // ["message", "__redis__:invalidate", keys | nil]
      if (!reply.is_array() || reply.size() != 3 || reply.At(0).str() != "message" ||
          reply.At(1).str() != kChannel)
        return Misbehaved("unexpected reply while listening");
      return OnMessage(reply.At(2));
  }
}

void RedisTracker::OnMessage(RespView payload) {
  if (payload.is_nil()) return sink_->OnInvalidateAll();  // FLUSHALL / FLUSHDB
  if (!payload.is_array()) return Misbehaved("invalidation message without a key list");
  const std::string& prefix = endpoint_.prefix;
  for (RespView key : payload) {
    if (!key.is_string()) continue;
    std::string_view k = key.str();
    if (k.substr(0, prefix.size()) != prefix) continue;  // another user of the server
    sink_->OnInvalidate(k.substr(prefix.size()));
  }
}

}  // namespace rankd

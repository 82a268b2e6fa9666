// index_builder.h: one coroutine on the builder's loop runs every build in turn.
#include "server/index_builder.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "cache/cached_values.h"
#include "core/awaitables.h"
#include "core/log.h"
#include "core/parse_int.h"
#include "redis/cluster_slots.h"
#include "redis/server_pool.h"
#include "tasks/io_replies.h"

namespace rankd {

namespace {

// Keys one SCAN step asks for; their fields are then read in one pipelined batch.
constexpr int64_t kScanCount = 1000;
constexpr int64_t kRetryMs = 1000;  // a failed build is tried again this soon
constexpr auto kBatchTimeout = std::chrono::seconds(10);

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
      .count();
}

// `text` matched literally by a SCAN MATCH glob.
std::string GlobEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string AddressKey(const RedisEndpoint& e) { return e.host + ':' + std::to_string(e.port); }

// The lowest CPU priority for the calling thread only (Linux: a thread's nice is its
// own), so that a build takes what CPU the shards leave. Once per thread.
void LowestPriority() {
  thread_local bool done = false;
  if (done) return;
  done = true;
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19) != 0)
    LogWarn(std::string("index builder: setpriority: ") + std::strerror(errno));
}

}  // namespace

struct IndexBuilder::Pending {
  SchemaPtr schema;
  bool done = false;
  Status status;
};

IndexBuilder::IndexBuilder(Options opts, AnnIndexes& out) : opts_(std::move(opts)), out_(out) {}

IndexBuilder::~IndexBuilder() { Stop(); }

void IndexBuilder::Start(SchemaPtr schema) {
  if (started_) return;
  started_ = true;
  {
    std::lock_guard lock(problems_mu_);
    declared_.clear();
    for (const AnnIndexSpec& s : schema->indexes) {
      declared_.push_back(s.name);
      problems_[s.name] = "building";
    }
  }
  runtime_.Start();
  runtime_.OnLoop([this, schema = std::move(schema)]() mutable {
    LowestPriority();
    schema_ = std::move(schema);
    for (const AnnIndexSpec& s : schema_->indexes) due_ms_[s.name] = 0;
    Spawn(Run());
  });
}

Status IndexBuilder::Prepare(SchemaPtr schema) {
  if (!started_) {
    if (schema->indexes.empty()) return {};
    Start(std::make_shared<const Schema>());
  }
  Pending p{std::move(schema), false, {}};
  std::unique_lock lock(mu_);
  if (stopping_) return Fail(Error::Unavailable("index builder: stopping"));
  while (pending_) cv_.wait(lock);  // another Prepare first (SIGHUP and the folder watch)
  pending_ = &p;
  cv_.wait(lock, [&] { return p.done; });
  return p.status;
}

void IndexBuilder::Stop() {
  if (!started_) return;
  started_ = false;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  // Pending reads fail at once; a build in faiss ends at its next chunk.
  runtime_.OnLoop([this] {
    for (auto& [addr, pool] : pools_) pool->Close();
  });
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return finished_; });
  }
  runtime_.OnLoop([this] { pools_.clear(); });
  runtime_.Stop();
}

bool IndexBuilder::Ready() const {
  std::lock_guard lock(problems_mu_);
  return out_.Has(declared_);
}

std::string IndexBuilder::NotReadyReason() const {
  std::lock_guard lock(problems_mu_);
  AnnSetPtr set = out_.Current();
  std::string why;
  for (const std::string& name : declared_) {
    if (set->Find(name)) continue;
    auto it = problems_.find(name);
    if (!why.empty()) why += "; ";
    why += "index '" + name + "' has no build yet" +
           (it != problems_.end() && !it->second.empty() ? ": " + it->second : "");
  }
  return why;
}

void IndexBuilder::SetProblem(const std::string& index, std::string why) {
  std::lock_guard lock(problems_mu_);
  problems_[index] = std::move(why);
}

Coro<void> IndexBuilder::Run() {
  EventLoop& loop = runtime_.loop();
  for (;;) {
    Pending* p = nullptr;
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
      p = pending_;
    }
    if (p) {
      // A reload: what is new or changed is built before the plans that use it.
      SchemaPtr next = p->schema;
      for (const AnnIndexSpec& spec : next->indexes) {
        const AnnIndex* have = out_.Current()->Find(spec.name);
        if (have && have->spec().content_sha256 == spec.content_sha256 &&
            have->size() <= static_cast<size_t>(spec.max_items))
          continue;
        // Declared as before but not built yet (Redis down at start): the background
        // retries go on, /readyz stays 503 and its plans answer 503 meanwhile, so a reload
        // of other plans need not wait for it, nor fail with it.
        const auto before =
            std::find_if(schema_->indexes.begin(), schema_->indexes.end(),
                         [&](const AnnIndexSpec& s) { return s.name == spec.name; });
        if (!have && before != schema_->indexes.end() &&
            before->content_sha256 == spec.content_sha256)
          continue;
        if (!co_await BuildOne(spec, *next, have == nullptr)) {
          std::lock_guard lock(problems_mu_);
          p->status = Fail(Error::Unavailable("index '" + spec.name +
                                              "' could not be built: " + problems_[spec.name]));
          break;
        }
        due_ms_[spec.name] = NowMs() + spec.refresh_s * 1000;
      }
      if (p->status) {
        std::vector<std::string> names;
        for (const AnnIndexSpec& spec : next->indexes) {
          names.push_back(spec.name);
          if (!due_ms_.contains(spec.name)) due_ms_[spec.name] = NowMs() + spec.refresh_s * 1000;
        }
        out_.Retain(names);
        schema_ = next;
        std::lock_guard lock(problems_mu_);
        declared_ = std::move(names);
      }
      {
        std::lock_guard lock(mu_);
        p->done = true;
        pending_ = nullptr;
      }
      cv_.notify_all();
      continue;
    }
    SchemaPtr schema = schema_;
    for (const AnnIndexSpec& spec : schema->indexes) {
      if (due_ms_[spec.name] > NowMs()) continue;
      const bool first = out_.Current()->Find(spec.name) == nullptr;
      const bool ok = co_await BuildOne(spec, *schema, first);
      due_ms_[spec.name] = NowMs() + (ok ? spec.refresh_s * 1000 : kRetryMs);
      std::lock_guard lock(mu_);
      if (stopping_ || pending_) break;
    }
    co_await SleepMs(loop, 100);
  }
  {
    std::lock_guard lock(mu_);
    finished_ = true;
    if (pending_) {
      pending_->status = Fail(Error::Unavailable("index builder: stopping"));
      pending_->done = true;
      pending_ = nullptr;
    }
  }
  cv_.notify_all();
}

Coro<bool> IndexBuilder::BuildOne(const AnnIndexSpec& spec, const Schema& schema, bool may_load) {
  AnnIndexStats& stats = AnnIndexStatsOf(spec.name);
  const auto start = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const std::string path =
      opts_.index_dir.empty() ? "" : opts_.index_dir + "/" + spec.name + ".ann";
  auto fits = [&](size_t bytes) { return bytes + out_.BytesBesides(spec.name) <= opts_.max_bytes; };
  auto refuse = [&](MetricValue<uint64_t>& outcome, std::string why) {
    ++outcome;
    stats.build_seconds = seconds();
    LogWarn("index '" + spec.name +
            "': build failed, keeping the index built before (if any): " + why);
    SetProblem(spec.name, std::move(why));
    return false;
  };
  auto install = [&](AnnIndexPtr index, MetricValue<uint64_t>& outcome, std::string_view how) {
    ++outcome;
    stats.items = index->size();
    stats.bytes = index->bytes();
    stats.build_seconds = seconds();
    LogInfo("index '" + spec.name + "': " + std::string(how) + " " + std::to_string(index->size()) +
            " items (" + std::to_string(index->bytes() >> 10) + " KiB) in " +
            std::to_string(seconds()) + " s");
    out_.Install(std::move(index));
    SetProblem(spec.name, "");
  };
  if (may_load && !path.empty()) {
    std::optional<Result<AnnIndexPtr>> loaded;
    co_await OffloadCpu(runtime_.loop(), runtime_.cpu(), [&spec, &path, &loaded] {
      LowestPriority();
      loaded.emplace(AnnIndex::Load(spec, path));
      return std::monostate{};
    });
    if (*loaded && fits((**loaded)->bytes())) {
      install(std::move(**loaded), stats.builds_loaded, "loaded from " + path + ":");
      co_return true;
    }
    if (!*loaded && loaded->error().code != ErrorCode::kNotFound)
      LogWarn(loaded->error().message + "; building it from Redis");
  }
  const KeyFamily* family = schema.Find(spec.family);
  if (!family) co_return refuse(stats.builds_failed, "no family '" + spec.family + "'");
  auto items = co_await ReadItems(spec, *family, stats);
  if (!items)
    co_return refuse(items.error().code == ErrorCode::kBadRequest ? stats.builds_over_max_items
                                                                  : stats.builds_failed,
                     items.error().message);
  // A first bound before faiss allocates: the vectors and level-0 links of every item.
  const size_t estimate = items->size() * (4 * size_t{spec.dim} + 8 * kAnnM + 8);
  if (!fits(estimate))
    co_return refuse(stats.builds_over_max_bytes,
                     std::to_string(items->size()) + " items need about " +
                         std::to_string(estimate) + " bytes, over --index-max-bytes " +
                         std::to_string(opts_.max_bytes) + " with the other indexes");
  // On the builder's own worker (niced like its loop), as the load above: seconds of work
  // on the loop would leave its timers' clock behind, and the next batch's deadline
  // would pass at once.
  std::optional<Result<AnnIndexPtr>> built;
  co_await OffloadCpu(runtime_.loop(), runtime_.cpu(), [this, &spec, &items, &built] {
    LowestPriority();
    built.emplace(AnnIndex::Build(spec, std::move(*items), &stopping_));
    return std::monostate{};
  });
  if (!*built)
    co_return refuse(built->error().code == ErrorCode::kBadRequest ? stats.builds_over_max_items
                                                                   : stats.builds_failed,
                     built->error().message);
  if (!fits((**built)->bytes()))
    co_return refuse(stats.builds_over_max_bytes,
                     std::to_string((**built)->bytes()) + " bytes, over --index-max-bytes " +
                         std::to_string(opts_.max_bytes) + " with the other indexes");
  if (!path.empty())
    if (auto saved = (**built)->Save(path); !saved) LogWarn(saved.error().message);
  install(std::move(**built), stats.builds_ok, "built");
  co_return true;
}

Coro<Result<AnnItems>> IndexBuilder::ReadItems(const AnnIndexSpec& spec, const KeyFamily& family,
                                               AnnIndexStats& stats) {
  auto masters = co_await Masters();
  if (!masters) co_return Fail(std::move(masters.error()));
  const size_t field = *family.FieldIndex(spec.field);
  const size_t fields[1] = {field};
  const bool json = family.type == FamilyType::kJson;
  const bool str_ids = family.id_type == ColumnType::kStr;
  AnnItems items;
  items.id_type = family.id_type;
  std::vector<float> v(spec.dim);
  for (RedisClient* node : *masters) {
    const std::string& prefix = node->prefix();
    const std::string pattern =
        GlobEscape(prefix + family.key_prefix) + "*" + GlobEscape(family.key_suffix);
    const ReplySource src{node->endpoint().name, prefix, &node->endpoint(), &family};
    std::string cursor = "0";
    do {
      RedisCommands scan;
      scan.Add(6).Arg("SCAN").Arg(cursor).Arg("MATCH").Arg(pattern).Arg("COUNT").Arg(kScanCount);
      auto step = co_await node->Batch(std::move(scan), Clock::now() + kBatchTimeout);
      if (!step) co_return Fail(std::move(step.error()));
      const RespView r = (*step)[0];
      if (!r.is_array() || r.size() != 2 || !r.At(0).is_string() || !r.At(1).is_array())
        co_return Fail(
            Error::Backend(node->endpoint().name + ": SCAN " + cursor + ": unexpected reply"));
      cursor = std::string(r.At(0).str());
      // The keys whose id parses, and the read of each one's field.
      std::vector<int64_t> nums;
      std::vector<std::string> strs;
      RedisCommands reads;
      for (RespView k : r.At(1)) {
        const std::string_view key = k.str();
        if (!key.starts_with(prefix)) continue;
        auto id = family.MatchKey(key.substr(prefix.size()));
        if (!id) continue;  // SCAN's glob matched, but not the whole template
        if (str_ids) {
          if (!ValidStrId(*id)) {
            ++stats.bad_ids;
            continue;
          }
          strs.emplace_back(*id);
        } else {
          auto n = ParseStrictInt<int64_t>(*id);
          if (!n) {
            ++stats.bad_ids;
            continue;
          }
          nums.push_back(*n);
        }
        if (json)
          reads.Add(2).Arg("MGET").Arg(key);
        else
          reads.Add(3).Arg("HMGET").Arg(key).Arg(spec.field);
      }
      if (reads.empty()) continue;
      const size_t n = reads.size();
      auto got = co_await node->Batch(std::move(reads), Clock::now() + kBatchTimeout);
      if (!got) co_return Fail(std::move(got.error()));
      CachedFields cells;
      cells.resize(n);
      for (size_t i = 0; i < n; ++i) {
        const IdRef id = str_ids ? IdRef{0, strs[i]} : IdRef{nums[i], {}};
        // A key of another type (WRONGTYPE) names no item: skipped like a missing field.
        if (!DecodeFields(src, id, fields, (*got)[i], cells, i)) continue;
        if (cells.state(i) == CachedField::State::kValue) {
          std::memcpy(v.data(), cells.str(i).data(), 4 * v.size());
          items.Add(id, v);
        } else if (cells.state(i) == CachedField::State::kBad) {
          ++stats.bad_vectors;
        }
      }
      if (items.size() > static_cast<size_t>(spec.max_items))
        co_return Fail(Error::BadRequest("more than max_items " + std::to_string(spec.max_items) +
                                         " items in family '" + family.name + "'"));
    } while (cursor != "0");
  }
  co_return items;
}

RedisClient& IndexBuilder::PoolAt(const RedisEndpoint& at) {
  auto& slot = pools_[AddressKey(at)];
  if (!slot) {
    RedisClientOptions o = opts_.redis;
    o.connections_per_endpoint = 1;
    slot = std::make_unique<RedisPool>(runtime_.loop(), at, o);
  }
  return *slot;
}

Coro<Result<void>> IndexBuilder::WaitLive(RedisClient& pool) {
  // A pool connects in the background: give a fresh one (or one reconnecting) a moment.
  for (int i = 0; i < 40 && !pool.live(); ++i) co_await SleepMs(runtime_.loop(), 50);
  if (!pool.live()) co_return Fail(Error::Unavailable(pool.NotLiveReason()));
  co_return Result<void>{};
}

Coro<Result<std::vector<RedisClient*>>> IndexBuilder::Masters() {
  const RedisEndpoint& ep = opts_.endpoint;
  if (!ep.is_cluster()) {
    RedisClient& pool = PoolAt(ep);
    if (auto live = co_await WaitLive(pool); !live) co_return Fail(std::move(live.error()));
    co_return std::vector<RedisClient*>{&pool};
  }
  Error last = Error::Unavailable(ep.Label() + ": no seed answered CLUSTER SLOTS");
  for (const RedisAddress& seed : ep.cluster_seeds) {
    RedisClient& pool = PoolAt(ep.AtNode(seed));
    if (auto live = co_await WaitLive(pool); !live) {
      last = std::move(live.error());
      continue;
    }
    RedisCommands cmd;
    cmd.Add(2).Arg("CLUSTER").Arg("SLOTS");
    auto reply = co_await pool.Batch(std::move(cmd), Clock::now() + kBatchTimeout);
    if (!reply) {
      last = std::move(reply.error());
      continue;
    }
    auto map = SlotMap::FromClusterSlots((*reply)[0], seed, opts_.redis.max_cluster_nodes);
    if (!map) {
      last = std::move(map.error());
      continue;
    }
    std::vector<RedisClient*> masters;
    for (const SlotMap::Range& range : map->ranges()) {
      RedisClient& m = PoolAt(ep.AtNode(map->nodes()[static_cast<size_t>(range.master)]));
      if (std::find(masters.begin(), masters.end(), &m) != masters.end()) continue;
      if (auto live = co_await WaitLive(m); !live) co_return Fail(std::move(live.error()));
      masters.push_back(&m);
    }
    co_return masters;
  }
  co_return Fail(std::move(last));
}

}  // namespace rankd

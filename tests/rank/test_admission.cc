#include <doctest/doctest.h>

#include <memory>

#include "rank/admission.h"
#include "rank/latency_window.h"

namespace rankd {
namespace {

PlanPtr MakePlan(std::string name, bool quality = false) {
  auto p = std::make_shared<Plan>();
  p->name = std::move(name);
  if (quality) {
    p->quality.enabled = true;
    p->quality.target_p95_ms = 10;
    p->quality.min = 0.3;
  }
  return p;
}

}  // namespace

TEST_CASE("LatencyWindow: quantiles of the last 200, cached between recomputations") {
  LatencyWindow w;
  CHECK(w.Median() == 0);
  for (int i = 1; i <= 100; ++i) w.Add(i);
  CHECK(w.Median() == 50);
  CHECK(w.P95() == 95);
  for (int i = 0; i < 200; ++i) w.Add(1000);  // the window holds only these now
  CHECK(w.Median() == 1000);
  w.Add(-5);  // clamped at 0; a full window recomputes only every 16 samples
  CHECK(w.size() == LatencyWindow::kSize);
  CHECK(w.added() == 301);
}

TEST_CASE("Admission: fixed mode admits up to --max-inflight, by priority") {
  AdmissionOptions o;
  o.adaptive = false;
  o.max_inflight = 10;
  Admission a(o);
  auto plan = MakePlan("p");
  Admission::Ticket t;
  CHECK(a.limit() == 10);
  CHECK(!a.Admit(plan, 9, Priority::kDefault, 1000000, t));
  CHECK(a.Admit(plan, 10, Priority::kDefault, 1000000, t) == Refusal::kLimit);
  CHECK(a.Admit(plan, 5, Priority::kSheddable, 1000000, t) == Refusal::kLimit);
  CHECK(!a.Admit(plan, 4, Priority::kSheddable, 1000000, t));
  CHECK(a.LimitFor(Priority::kCritical) == 10);  // never past --max-inflight
  CHECK(a.AdmitShadow(4));
  CHECK(!a.AdmitShadow(5));
}

TEST_CASE("Admission: a deadline shorter than the plan's median 2xx time is refused") {
  AdmissionOptions o;
  o.adaptive = false;
  Admission a(o);
  auto plan = MakePlan("p");
  Admission::Ticket t;
  for (int i = 0; i < 49; ++i) {
    REQUIRE(!a.Admit(plan, 0, Priority::kDefault, 1000000, t));
    a.OnAnswer(t, 30000, true);
  }
  // 49 answers: not trusted yet.
  CHECK(!a.Admit(plan, 0, Priority::kDefault, 1000, t));
  a.OnAnswer(t, 30000, true);
  CHECK(a.Admit(plan, 0, Priority::kDefault, 29000, t) == Refusal::kDeadline);
  CHECK(!a.Admit(plan, 0, Priority::kDefault, 31000, t));
  // Failed answers do not count as times to a 2xx.
  for (int i = 0; i < 300; ++i) a.OnAnswer(t, 250000, false);
  CHECK(!a.Admit(plan, 0, Priority::kDefault, 31000, t));
}

TEST_CASE("Admission: the adaptive limit falls with latency and grows back when used") {
  AdmissionOptions o;
  o.max_inflight = 1000;
  Admission a(o);
  auto plan = MakePlan("p");
  TimePoint now = Clock::now();
  Admission::Ticket t;
  // No-load latency from answers admitted alone: 2 ms.
  for (int i = 0; i < 10; ++i) {
    REQUIRE(!a.Admit(plan, 0, Priority::kDefault, 1000000, t));
    CHECK(t.alone);
    a.OnAnswer(t, 2000, true);
  }
  REQUIRE(a.loads().at("p")->no_load_us == 2000);
  CHECK(a.limit() == 128);
  // Requests at 8x their no-load latency, taking 40% of their deadline: the limit
  // shrinks (gradient 0.5 a tick).
  for (int tick = 0; tick < 14; ++tick) {
    for (int i = 0; i < 20; ++i) {
      if (!a.Admit(plan, 3, Priority::kDefault, 40000, t)) a.OnAnswer(t, 16000, true);
    }
    now += std::chrono::milliseconds(100);
    a.OnTick(now, a.limit());
  }
  CHECK(a.limit() == 4);  // the floor
  // At no-load latency with the limit in use it grows (at most doubling a tick).
  size_t before = a.limit();
  for (int i = 0; i < 20; ++i)
    if (!a.Admit(plan, 1, Priority::kDefault, 1000000, t)) a.OnAnswer(t, 2000, true);
  now += std::chrono::milliseconds(100);
  a.OnTick(now, a.limit());
  CHECK(a.limit() > before);
  CHECK(a.limit() <= 2 * before + 3);
  // A limit nobody uses does not grow.
  before = a.limit();
  for (int i = 0; i < 20; ++i)
    if (!a.Admit(plan, 0, Priority::kDefault, 1000000, t)) a.OnAnswer(t, 2000, true);
  now += std::chrono::milliseconds(100);
  a.OnTick(now, 0);
  CHECK(a.limit() == before);
}

TEST_CASE("Admission: no shrinking while answers take under a quarter of their deadline") {
  AdmissionOptions o;
  o.max_inflight = 1000;
  Admission a(o);
  auto plan = MakePlan("p");
  TimePoint now = Clock::now();
  Admission::Ticket t;
  for (int i = 0; i < 10; ++i) {
    REQUIRE(!a.Admit(plan, 0, Priority::kDefault, 1000000, t));
    a.OnAnswer(t, 2000, true);
  }
  // 8x the no-load latency, as above, but 16 ms of a 2 s deadline (a closed-loop client
  // with many requests outstanding): the queue costs nobody anything, the limit holds.
  for (int tick = 0; tick < 14; ++tick) {
    for (int i = 0; i < 20; ++i)
      if (!a.Admit(plan, 100, Priority::kDefault, 2000000, t)) a.OnAnswer(t, 16000, true);
    now += std::chrono::milliseconds(100);
    a.OnTick(now, 100);
  }
  CHECK(a.limit() >= 128);
  // The same answers against a 50 ms deadline (32% of it): it shrinks.
  size_t before = a.limit();
  for (int i = 0; i < 20; ++i)
    if (!a.Admit(plan, 3, Priority::kDefault, 50000, t)) a.OnAnswer(t, 16000, true);
  now += std::chrono::milliseconds(100);
  a.OnTick(now, a.limit());
  CHECK(a.limit() < before);
}

TEST_CASE("Admission: a loaded plan without a no-load estimate is measured one at a time") {
  AdmissionOptions o;
  o.probe_after_ms = 2000;
  o.probe_requests = 5;
  o.initial_limit = 8;
  Admission a(o);
  auto plan = MakePlan("p");
  TimePoint now = Clock::now();
  Admission::Ticket t;
  // Always busy (never admitted alone, so no estimate), and refusing at its limit.
  auto busy_tick = [&](std::chrono::milliseconds step) {
    for (int i = 0; i < 5; ++i)
      if (!a.Admit(plan, 2, Priority::kDefault, 1000000, t)) a.OnAnswer(t, 9000, true);
    CHECK(a.Admit(plan, 100, Priority::kDefault, 1000000, t) == Refusal::kLimit);
    now += step;
    a.OnTick(now, 2);
  };
  for (int tick = 0; tick < 8; ++tick) busy_tick(std::chrono::milliseconds(100));
  REQUIRE(a.loads().at("p")->no_load_us == 0);
  CHECK(a.limit() == 8);
  // Past probe_after: the next tick pins the limit at 1.
  busy_tick(std::chrono::seconds(2));
  CHECK(a.limit() == 1);
  CHECK(a.Admit(plan, 1, Priority::kDefault, 1000000, t) == Refusal::kLimit);
  for (int i = 0; i < 5; ++i) {
    REQUIRE(!a.Admit(plan, 0, Priority::kDefault, 1000000, t));
    a.OnAnswer(t, 3000, true);
  }
  now += std::chrono::milliseconds(100);
  a.OnTick(now, 0);
  CHECK(a.loads().at("p")->no_load_us == 3000);
  CHECK(a.limit() >= 4);
  CHECK(a.stats().probes.value() == 1);
}

TEST_CASE("Admission: without an estimate, answers late against their deadlines halve it") {
  // 48 clients piling up work, never one alone, and nothing refused yet (the limit is
  // over them): there is no estimate to steer by. Answers taking 45% of their deadline
  // halve the limit each tick; once it refuses, a measurement follows.
  AdmissionOptions o;
  o.probe_after_ms = 500;
  o.probe_requests = 5;
  Admission a(o);
  auto plan = MakePlan("p");
  TimePoint now = Clock::now();
  Admission::Ticket t;
  for (int i = 0; i < 10; ++i)
    if (!a.Admit(plan, 47, Priority::kDefault, 20000, t)) a.OnAnswer(t, 9000, true);
  now += std::chrono::milliseconds(100);
  a.OnTick(now, 48);
  CHECK(a.limit() == 64);
  // Refusing now, for probe_after: the limit is pinned at 1 to measure.
  for (int tick = 0; tick < 7 && a.limit() > 1; ++tick) {
    const size_t running = a.limit() - 1;  // the shard full: the rest are refused
    for (int i = 0; i < 10; ++i)
      if (!a.Admit(plan, running, Priority::kDefault, 20000, t)) a.OnAnswer(t, 9000, true);
    CHECK(a.Admit(plan, running + 1, Priority::kDefault, 20000, t) == Refusal::kLimit);
    now += std::chrono::milliseconds(100);
    a.OnTick(now, running);
  }
  CHECK(a.limit() == 1);
}

TEST_CASE("Admission: a shard that refuses nothing never pins its limit to measure") {
  AdmissionOptions o;
  o.probe_after_ms = 100;
  Admission a(o);
  auto plan = MakePlan("p");
  TimePoint now = Clock::now();
  Admission::Ticket t;
  for (int tick = 0; tick < 30; ++tick) {
    for (int i = 0; i < 5; ++i)
      if (!a.Admit(plan, 2, Priority::kDefault, 1000000, t)) a.OnAnswer(t, 9000, true);
    now += std::chrono::milliseconds(100);
    a.OnTick(now, 2);
    REQUIRE(a.limit() == 128);
  }
  CHECK(a.stats().probes.value() == 0);
}

TEST_CASE("Admission: quality falls over target or while refusing, climbs back slowly") {
  AdmissionOptions o;
  o.adaptive = false;
  o.max_inflight = 2;
  Admission a(o);
  auto plan = MakePlan("q", true);
  a.Install({plan});
  TimePoint now = Clock::now();
  Admission::Ticket t;
  auto load = a.LoadFor(plan);
  CHECK(a.QualityOf(*load) == 1.0);
  CHECK(a.QualityOf(*a.LoadFor(MakePlan("plain"))) < 0);
  for (int tick = 0; tick < 20; ++tick) {
    for (int i = 0; i < 10; ++i) {
      REQUIRE(!a.Admit(plan, 0, Priority::kDefault, 1000000, t));
      a.OnAnswer(t, 20000, true);  // p95 20 ms > 10 ms
    }
    now += std::chrono::milliseconds(100);
    a.OnTick(now, 0);
  }
  CHECK(a.QualityOf(*load) == doctest::Approx(0.3));
  // Fast enough again: +0.02 a tick.
  for (int tick = 0; tick < 5; ++tick) {
    for (int i = 0; i < 200; ++i) {
      REQUIRE(!a.Admit(plan, 0, Priority::kDefault, 1000000, t));
      a.OnAnswer(t, 1000, true);
    }
    now += std::chrono::milliseconds(100);
    a.OnTick(now, 0);
  }
  CHECK(a.QualityOf(*load) == doctest::Approx(0.4));
  // Refusing for the limit pushes it down even when the plan is fast.
  CHECK(a.Admit(plan, 2, Priority::kDefault, 1000000, t) == Refusal::kLimit);
  now += std::chrono::milliseconds(100);
  a.OnTick(now, 0);
  CHECK(a.QualityOf(*load) == doctest::Approx(0.35));
}

}  // namespace rankd

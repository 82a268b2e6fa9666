#!/usr/bin/env bash
# ops/bench served_log — what the served log (docs/served-log.md) costs the server: the
# demo's `rerank` plan (a `model` node, so every record carries each item's model inputs
# and score) with its log block at `sample: 1.0`, against the same plan with no log block
# (logging off), in the same run. Three rankd serve (current build, 2 shards, the same
# flags, --cache-mb CACHE_MB: 0 by default, as `ops/bench feed` and `ops/bench model` serve
# rerank) on one seeded redis-server (`rankd seed`, 10,000 users, seed 1):
#   off     plans/rerank without its log block, no --served-log
#   stream  rerank_stream: log sink "s" = redis-stream://logs?stream=served&maxlen=MAXLEN,
#           the `logs` endpoint a second, separate redis-server
#   file    rerank_file: log sink "f" = file://TMP/served.jsonl?max_mb=256&keep=1
# The logged plans keep the rest of the demo's log block (its 20 unserved candidates from
# top_k; LOG_CANDIDATES=none drops them). Under wrk with a viewer drawn per request from
# users 0..VIEWERS-1, rounds alternate between the three (the order reverses every round,
# bench/lib.sh's run_rounds), each a 1 s warm-up then WRK_SECONDS measured; each rankd's
# CPU is its own /proc/PID/task/*/stat over the measured run (the file sink's writer
# thread included, and shown alone as writer_thread_us_per_req; neither redis-server's CPU
# is counted). Figures, medians of ROUNDS rounds, the logged variant as "value" and
# logging off as "baseline", with "ratio" and each round's ratio ("round_ratios"), for
# SINK = stream and file:
#   served_log_SINK_cpu_us_per_req   rankd's user + system CPU per request (target <= 1.05)
#   served_log_SINK_p99_latency      wrk's p99 (target <= 1.05)
#   served_log_SINK_p50_latency, served_log_SINK_rps
#   served_log_SINK_records_per_s    records written (rankd_served_log_records_total
#                                    {outcome="written"} delta, after the sink has settled)
#                                    per second of the measured run; with records per request
#   served_log_SINK_dropped          records dropped over all rounds, by outcome (should be
#                                    0: anything else means the sink could not keep up)
#   served_log_file_bytes_per_record   bytes of the log files on disk / their lines
#   served_log_stream_bytes_per_record the `record` field of the stream's last 100 entries
# Env: ROUNDS (5), WRK_THREADS (1), WRK_CONNS (16), WRK_SECONDS (8), VIEWERS (2000),
# CACHE_MB (0: every variant alike), MAXLEN (10000), LOG_CANDIDATES (plan | none).
# Time: 3 x ROUNDS x (WRK_SECONDS + about 2 s), about 3 minutes with the defaults.
set -euo pipefail
build=${RANKD_BUILD:?run through ops/bench}
root=${RANKD_ROOT:?run through ops/bench}
rounds=${ROUNDS:-5} threads=${WRK_THREADS:-1} conns=${WRK_CONNS:-16} secs=${WRK_SECONDS:-8}
viewers=${VIEWERS:-2000} cache_mb=${CACHE_MB:-0} maxlen=${MAXLEN:-10000}
candidates=${LOG_CANDIDATES:-plan}
case $candidates in plan | none) ;; *) echo "served_log: LOG_CANDIDATES is plan or none" >&2; exit 2 ;; esac
source "$root/bench/lib.sh"
tmp=$BENCH_TMP
rankd="$build/src/cli/rankd"

# The data plane: one seeded redis-server.
start_redis
data_port=$REDIS_PORT
"$rankd" seed --no-embeddings --redis "redis://127.0.0.1:$data_port" --users 10000 --seed 1 >&2

# The log sink's own redis-server, started as start_redis does, in its own folder.
log_port=$(free_port)
mkdir -p "$tmp/redis-log"
redis-server --port "$log_port" --bind 127.0.0.1 --save '' --appendonly no \
  --daemonize no --dir "$tmp/redis-log" --logfile "$tmp/redis-log/redis.log" &
bench_pids+=($!)
for i in $(seq 101); do
  redis-cli -p "$log_port" ping >/dev/null 2>&1 && break
  [ "$i" -eq 101 ] && { echo "the log redis-server did not start" >&2; exit 1; }
  sleep 0.05
done

# One plans folder per variant: rerank as it is (minus its log block), or renamed with
# the log block pointed at the variant's sink at sample 1.0.
variants=(off stream file)
declare -A plan_of=([off]=rerank [stream]=rerank_stream [file]=rerank_file)
declare -A sink_of=([stream]=s [file]=f)
for v in "${variants[@]}"; do
  mkdir -p "$tmp/plans_$v"
  cp "$root"/plans/*.model.json "$tmp/plans_$v/"
  python3 - "$root/plans/rerank.plan.json" "$tmp/plans_$v/${plan_of[$v]}.plan.json" \
    "${plan_of[$v]}" "${sink_of[$v]:-}" "$candidates" <<'PY'
import json, sys
src, dst, name, sink, candidates = sys.argv[1:]
p = json.load(open(src))
p["name"] = name
log = p.pop("log", None) or {}
if sink:
    log.update(sample=1.0, sink=sink)
    if candidates == "none":
        log.pop("candidates", None)
    p["log"] = log
json.dump(p, open(dst, "w"), indent=2)
PY
done

mkdir -p "$tmp/log"
common=(--host 127.0.0.1 --shards 2 --redis "redis_default=redis://127.0.0.1:$data_port"
        --log-level error --cache-mb "$cache_mb")
variant_flags() {  # variant_flags VARIANT -> flags (in the array `flags`) of its sink
  case $1 in
    off) flags=() ;;
    stream) flags=(--redis "logs=redis://127.0.0.1:$log_port"
                   --served-log "s=redis-stream://logs?stream=served&maxlen=$maxlen") ;;
    file) flags=(--served-log "f=file://$tmp/log/served.jsonl?max_mb=256&keep=1") ;;
  esac
}
declare -A port pid
for v in "${variants[@]}"; do
  port[$v]=$(free_port)
  variant_flags "$v"
  "$rankd" serve --port "${port[$v]}" --plans "$tmp/plans_$v" "${common[@]}" "${flags[@]}" &
  pid[$v]=$!
  bench_pids+=("${pid[$v]}")
  wait_http "http://127.0.0.1:${port[$v]}/readyz"
done

# server_counts VARIANT -> "ok written dropped_full dropped_error dropped_no_sink
# dropped_too_large degraded", summed over shards, from its /metrics.
server_counts() {
  curl -sf --max-time 5 "http://127.0.0.1:${port[$1]}/metrics" | awk '
    /^rankd_rank_requests_total[{ ]/ && /outcome="ok"/ {ok += $NF}
    /^rankd_served_log_records_total[{ ]/ {
      for (o = 1; o <= 5; o++) if (index($0, "outcome=\"" name[o] "\"")) n[o] += $NF }
    /^rankd_degraded_total[{ ]/ {d += $NF}
    BEGIN {split("written dropped_full dropped_error dropped_no_sink dropped_too_large", name, " ")}
    END {printf "%d %d %d %d %d %d %d\n", ok, n[1], n[2], n[3], n[4], n[5], d}'
}
# settle VARIANT -> its counts once they stop moving: the records of the requests answered
# so far have left the shards' buffers and the 100 ms tick has published them (5 s at most).
settle() {
  local prev="" cur
  for _ in $(seq 20); do
    cur=$(server_counts "$1")
    [ "$cur" = "$prev" ] && break
    prev=$cur
    sleep 0.25
  done
  echo "$cur"
}

# writer_ticks PID -> CPU ticks of its file sinks' writer threads (named served-log).
writer_ticks() {
  local t=0 d
  for d in /proc/"$1"/task/*; do
    [ "$(cat "$d/comm" 2>/dev/null)" = served-log ] || continue
    t=$((t + $(awk '{print $14 + $15}' "$d/stat" 2>/dev/null || echo 0)))
  done
  echo "$t"
}

# measure VARIANT PLAN -> one JSON line: wrk's figures, rankd's CPU per request over the
# measured run, and the served log's counts over it.
measure() {
  local v=$1 url="http://127.0.0.1:${port[$1]}/rank" body t0 t1 w0 w1 m0 m1 line
  # A 2 s deadline, as `ops/bench feed`: throughput and cost, not 504s on shared cores.
  body="{\"plan\":\"${plan_of[$v]}\",\"user_id\":\$USER,\"deadline_ms\":2000}"
  WRK_BODY=$body WRK_USERS=$viewers wrk -t"$threads" -c"$conns" -d1s -s "$root/bench/wrk_report.lua" "$url" >/dev/null
  m0=$(settle "$v"); t0=$(cpu_ticks "${pid[$v]}"); w0=$(writer_ticks "${pid[$v]}")
  line=$(WRK_BODY=$body WRK_USERS=$viewers wrk -t"$threads" -c"$conns" -d"${secs}s" --latency \
    -s "$root/bench/wrk_report.lua" "$url" | grep '^{"rps"')
  t1=$(cpu_ticks "${pid[$v]}"); w1=$(writer_ticks "${pid[$v]}"); m1=$(settle "$v")
  python3 -c '
import json, os, sys
d = json.loads(sys.argv[1])
a = list(map(int, sys.argv[4].split())); b = list(map(int, sys.argv[5].split()))
ok, written, full, err, nosink, large, degraded = (y - x for x, y in zip(a, b))
n = max(d["requests"], 1)
tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
d["cpu_us_per_req"] = (int(sys.argv[3]) - int(sys.argv[2])) * tick_us / n
d["writer_cpu_us_per_req"] = (int(sys.argv[7]) - int(sys.argv[6])) * tick_us / n
d["ok"] = ok
d["written"] = written
d["dropped"] = {"dropped_full": full, "dropped_error": err, "dropped_no_sink": nosink,
                "dropped_too_large": large}
d["records_per_s"] = written / (n / d["rps"]) if d["rps"] else 0.0
d["records_per_request"] = written / max(ok, 1)
d["degraded_per_request"] = degraded / max(ok, 1)
print(json.dumps(d))' "$line" "$t0" "$t1" "$m0" "$m1" "$w0" "$w1"
}

plans=(rerank)
run_rounds "${variants[@]}"

# Bytes per record: the file sink's files (the current one and the rotated one) and a
# sample of the stream's newest entries; the stream's length and its Redis's memory.
file_bytes=$(python3 - "$tmp/log" <<'PY'
import glob, os, sys
size = lines = 0
for f in glob.glob(os.path.join(sys.argv[1], "served.jsonl*")):
    size += os.path.getsize(f)
    with open(f, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            lines += chunk.count(b"\n")
print(size, lines)
PY
)
redis-cli -p "$log_port" --raw XREVRANGE served + - COUNT 100 > "$tmp/stream_sample.txt"
xlen=$(redis-cli -p "$log_port" XLEN served)
log_mem=$(redis-cli -p "$log_port" INFO memory | awk -F: '/^used_memory:/ {print $2+0}')
log_block=$(python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["log"]))' \
  "$tmp/plans_stream/rerank_stream.plan.json")

python3 - "$tmp/rounds.jsonl" "$threads" "$conns" "$secs" "$viewers" "$cache_mb" "$maxlen" \
  "$log_block" "$file_bytes" "$tmp/stream_sample.txt" "$xlen" "$log_mem" <<'PY' |
import json, os, statistics, sys
(rounds_file, threads, conns, secs, viewers, cache_mb, maxlen, log_block, file_bytes,
 sample_file, xlen, log_mem) = sys.argv[1:]
by = {"off": [], "stream": [], "file": []}
for line in open(rounds_file):
    row = json.loads(line)
    by[row["variant"]].append(row["r"])
ctx = {"machine": os.environ["MACHINE"], "build": "release+lto", "shards": 2,
       "cache_mb": int(cache_mb), "plan": "rerank",
       "log": {k: v for k, v in json.loads(log_block).items() if k != "sink"},
       "wrk": f"wrk -t{threads} -c{conns} -d{secs}s --latency", "viewers": int(viewers),
       "measure": f"median of {len(by['off'])} rounds, alternating off / stream / file"}
sinks = {"stream": f"redis-stream://logs?stream=served&maxlen={maxlen} (a second redis-server)",
         "file": "file://.../served.jsonl?max_mb=256&keep=1"}
failed = False
for v, rows in by.items():
    bad = sum(r["non2xx"] + r["socket_errors"] for r in rows)
    if bad:
        total = sum(r["requests"] for r in rows)
        failed = failed or bad > 0.01 * total
        print(json.dumps({"name": f"served_log_{v}_errors", "value": bad, "unit": "count",
                          "requests": total}))
figures = [("cpu_us_per_req", "cpu_us_per_req", "us", 1, "ratio <= 1.05"),
           ("p99_us", "p99_latency", "ms", 1e-3, "ratio <= 1.05"),
           ("p50_us", "p50_latency", "ms", 1e-3, None),
           ("rps", "rps", "req/s", 1, None)]
for v in ("stream", "file"):
    cur_rows, base_rows = by[v], by["off"]
    for key, name, unit, scale, target in figures:
        cur = [r[key] * scale for r in cur_rows]
        base = [r[key] * scale for r in base_rows]
        value, baseline = statistics.median(cur), statistics.median(base)
        ratios = [c / b if b else None for c, b in zip(cur, base)]
        out = {"name": f"served_log_{v}_{name}", "value": round(value, 3), "unit": unit,
               "baseline": round(baseline, 3),
               "ratio": round(value / baseline, 3) if baseline else None,
               "rounds": [round(x, 2) for x in cur], "baseline_rounds": [round(x, 2) for x in base],
               "round_ratios": [round(x, 3) if x else None for x in ratios]}
        if target:
            out["target"] = target
        if key == "cpu_us_per_req":
            out["degraded_per_request"] = round(statistics.median(r["degraded_per_request"] for r in cur_rows), 4)
            out["baseline_degraded_per_request"] = round(statistics.median(r["degraded_per_request"] for r in base_rows), 4)
            if v == "file":
                out["writer_thread_us_per_req"] = round(statistics.median(r["writer_cpu_us_per_req"] for r in cur_rows), 2)
        out.update(sink=sinks[v], **ctx)
        print(json.dumps(out))
    rec = [r["records_per_s"] for r in cur_rows]
    dropped = {k: sum(r["dropped"][k] for r in cur_rows) for k in cur_rows[0]["dropped"]}
    print(json.dumps({"name": f"served_log_{v}_records_per_s", "value": round(statistics.median(rec), 1),
                      "unit": "records/s", "rounds": [round(x, 1) for x in rec],
                      "records_per_request": [round(r["records_per_request"], 4) for r in cur_rows],
                      "written": sum(r["written"] for r in cur_rows),
                      "requests_ok": sum(r["ok"] for r in cur_rows),
                      "sink": sinks[v], **ctx}))
    print(json.dumps({"name": f"served_log_{v}_dropped", "value": sum(dropped.values()),
                      "unit": "records", "by_outcome": dropped,
                      "note": "over all measured runs; non-zero: the sink or the shard's buffer could not keep up",
                      "sink": sinks[v], **ctx}))
size, lines = map(int, file_bytes.split())
print(json.dumps({"name": "served_log_file_bytes_per_record",
                  "value": round(size / lines, 1) if lines else None, "unit": "bytes",
                  "note": "the log files on disk (served.jsonl and served.jsonl.1), newline included",
                  "records_on_disk": lines, "bytes_on_disk": size, "sink": sinks["file"], **ctx}))
entries = open(sample_file, "rb").read().split(b"\n")
# --raw XREVRANGE: per entry its id, the field name, the record (a JSON line: no newline).
records = [entries[i + 2] for i in range(0, len(entries) - 2, 3) if entries[i + 1] == b"record"]
print(json.dumps({"name": "served_log_stream_bytes_per_record",
                  "value": round(sum(map(len, records)) / len(records), 1) if records else None,
                  "unit": "bytes", "note": "the record field of the stream's newest entries",
                  "sampled": len(records), "xlen": int(xlen),
                  "log_redis_used_memory_bytes": int(log_mem),
                  "log_redis_bytes_per_entry": round(int(log_mem) / int(xlen), 1) if int(xlen) else None,
                  "sink": sinks["stream"], **ctx}))
if failed:
    sys.exit("served_log: over 1% of the requests failed (see the *_errors lines)")
PY
  with_baseline_command "the same build serving plans/rerank without its log block and no --served-log (2 shards, --cache-mb $cache_mb), on the same Redis, under the same wrk load"

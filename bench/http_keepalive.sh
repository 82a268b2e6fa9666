#!/usr/bin/env bash
# ops/bench http_keepalive — keep-alive GET throughput of one rankd HTTP listener alone
# (tests/http/http_test_server, /info: parse, handler, JSON answer; no routing, plans or
# metrics, unlike `ops/bench http`, which measures the whole server) against nginx with
# one worker answering a JSON body of the same size (`return 200`), both on loopback,
# same wrk settings, in one run. ROUNDS rounds alternate between the two so that both
# see the same machine; the medians are compared. Prints one JSON line.
# Env: WRK_THREADS (1), WRK_CONNS (32), WRK_SECONDS (5), ROUNDS (3).
set -euo pipefail
build=${RANKD_BUILD:?run through ops/bench}
threads=${WRK_THREADS:-1} conns=${WRK_CONNS:-32} secs=${WRK_SECONDS:-5} rounds=${ROUNDS:-3}
source "${RANKD_ROOT:?run through ops/bench}/bench/lib.sh"
tmp=$BENCH_TMP
wrk_cmd=(wrk -t"$threads" -c"$conns" -d"${secs}s" --latency)

rps() {  # rps URL -> requests/s reported by wrk
  "${wrk_cmd[@]}" "$1" | awk '/Requests\/sec/ {print $2}'
}

# The rankd listener, on a port it picks; ready once it prints it.
"$build/tests/http/http_test_server" --port 0 > "$tmp/rankd.out" &
bench_pids+=($!)
for _ in $(seq 200); do grep -q '^listening ' "$tmp/rankd.out" && break; sleep 0.05; done  # bounded poll
rport=$(awk '/^listening / {print $2}' "$tmp/rankd.out")
[ -n "$rport" ] || { echo "http_test_server did not start" >&2; exit 1; }
wait_http "http://127.0.0.1:$rport/info"

# The nginx baseline: one worker, no logging, the same answer as /info.
nport=$(free_port)
mkdir -p "$tmp/nginx"
cat > "$tmp/nginx/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $tmp/nginx; proxy_temp_path $tmp/nginx; fastcgi_temp_path $tmp/nginx;
  uwsgi_temp_path $tmp/nginx; scgi_temp_path $tmp/nginx;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$nport;
    location / { default_type application/json;
      return 200 '{"method":"GET","path":"/info","query":"","request_id":"0-1-1","content_type":"","connection":"","keep_alive":true,"http":"1.1","body_len":0,"headers":1}'; }
  }
}
CONF
nginx_cmd=(nginx -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx")
"${nginx_cmd[@]}" &
bench_pids+=($!)
wait_http "http://127.0.0.1:$nport/info"

: > "$tmp/rounds"
for round in $(seq "$rounds"); do
  echo "nginx $(rps "http://127.0.0.1:$nport/info")" >> "$tmp/rounds"
  echo "rankd $(rps "http://127.0.0.1:$rport/info")" >> "$tmp/rounds"
done

python3 - "$tmp/rounds" "${wrk_cmd[*]} http://127.0.0.1:$nport/info" "${nginx_cmd[*]}" \
  "${wrk_cmd[*]} http://127.0.0.1:$rport/info" "$MACHINE" <<'PY'
import json, statistics, sys
rounds_file, baseline_wrk, nginx, our_wrk, machine = sys.argv[1:]
by = {}
for line in open(rounds_file):
    who, rps = line.split()
    by.setdefault(who, []).append(float(rps))
r, n = statistics.median(by["rankd"]), statistics.median(by["nginx"])
print(json.dumps({
    "name": "http_keepalive_rps", "value": r, "unit": "req/s", "baseline": n, "ratio": round(r / n, 3),
    "rounds": by["rankd"], "baseline_rounds": by["nginx"],
    "measure": f"median of {len(by['rankd'])} alternating rounds",
    "command": our_wrk + " (tests/http/http_test_server)",
    "baseline_command": baseline_wrk + f" (server: {nginx}; worker_processes 1, access_log off, "
                        "return 200 with the /info answer's bytes)",
    "machine": machine}))
PY

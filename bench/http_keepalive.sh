#!/usr/bin/env bash
# ops/bench http_keepalive — keep-alive GET throughput of one rankd HTTP listener
# (tests/http/http_test_server, /info: parse, handler, JSON answer) against nginx with
# one worker answering a fixed JSON body (`return 200`), both on loopback, same wrk
# settings, in one run. Prints one JSON line per server plus the ratio.
# Env: WRK_THREADS (1), WRK_CONNS (32), WRK_SECONDS (5).
set -euo pipefail
build=${RANKD_BUILD:?run through ops/bench}
threads=${WRK_THREADS:-1} conns=${WRK_CONNS:-32} secs=${WRK_SECONDS:-5}
source "${RANKD_ROOT:?run through ops/bench}/bench/lib.sh"
tmp=$BENCH_TMP

rps() {  # rps URL -> requests/s reported by wrk
  wrk -t"$threads" -c"$conns" -d"${secs}s" --latency "$1" | awk '/Requests\/sec/ {print $2}'
}

# rankd listener
rport=$(free_port)
"$build/tests/http/http_test_server" --port "$rport" > "$tmp/rankd.out" &
bench_pids+=($!)
for _ in $(seq 100); do grep -q listening "$tmp/rankd.out" && break; sleep 0.05; done

# nginx baseline: one worker, no logging, the same size of answer
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
nginx -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx" &
bench_pids+=($!)
sleep 0.5

r=$(rps "http://127.0.0.1:$rport/info")
n=$(rps "http://127.0.0.1:$nport/info")
ratio=$(python3 -c "print(round($r/$n, 3))")
settings="wrk -t$threads -c$conns -d${secs}s, loopback"
echo "{\"name\": \"http_keepalive_rps\", \"value\": $r, \"unit\": \"req/s\", \"baseline\": $n, \"baseline_name\": \"nginx 1 worker return 200\", \"ratio\": $ratio, \"settings\": \"$settings\", \"machine\": \"$MACHINE\"}"

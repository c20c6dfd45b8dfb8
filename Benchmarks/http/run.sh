#!/usr/bin/env bash
# HTTP load test of `cloudlet serve` with wrk: requests/s and p50/p99 latency of single-record records/modify
# (create, durability fsync) and records/lookup, keep-alive, at 1 and 32 connections, next to GET /cloudlet/health
# on the same server (the framework ceiling), and each route's ratio to it. See README.md next to this file.
#
# Every (route, connections) cell is measured ROUNDS times, rounds interleaved so that drift on a shared machine falls
# on all cells alike; the table shows the median of each column.
#
# Environment: DURATION (seconds per measured run, default 10), WARMUP (default 2), ROUNDS (default 3),
# CONNECTIONS (default "1 32"), DURABILITY (fsync|os, default fsync), SWIFTPM_FLAGS (e.g. --scratch-path DIR),
# KEEP=1 keeps the work directory (raw wrk output, access log, data), CLOUDLET_BIN=PATH measures that binary
# instead of building this checkout (to compare two commits in one session).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
duration="${DURATION:-10}"
warmup="${WARMUP:-2}"
rounds="${ROUNDS:-3}"
connections="${CONNECTIONS:-1 32}"
durability="${DURABILITY:-fsync}"
read -r -a swiftpm_flags <<<"${SWIFTPM_FLAGS:-}"

"$root/.ci/install-deps" "$here/packages" >&2

cd "$root"
if [[ -n "${CLOUDLET_BIN:-}" ]]; then
    bin="$CLOUDLET_BIN"  # an existing build, e.g. another commit's, to compare in the same session
else
    swift build -c release --product cloudlet ${swiftpm_flags[@]+"${swiftpm_flags[@]}"} >&2
    bin="$(swift build -c release --show-bin-path ${swiftpm_flags[@]+"${swiftpm_flags[@]}"})/cloudlet"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/cloudlet-http-bench.XXXXXX")"
server_pid=""
cleanup() {
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid"
        wait "$server_pid" || true
    fi
    if [[ "${KEEP:-0}" == 1 ]]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

"$bin" serve --data "$work/data" --port 0 --durability "$durability" >"$work/serve.out" 2>"$work/access.log" &
server_pid=$!
for _ in $(seq 1 200); do grep -q '^listening on ' "$work/serve.out" && break; sleep 0.05; done
url="$(sed -n 's/^listening on //p' "$work/serve.out")"
[[ -n "$url" ]] || { echo "error: the server did not start; see $work/serve.out" >&2; cat "$work/access.log" >&2; exit 1; }
api="$(sed -n 's/^ *ckAPIToken: //p' "$work/serve.out")"
web="$(sed -n 's/^ *ckWebAuthToken: //p' "$work/serve.out")"
# /cloudlet/metrics takes the admin credential a fresh store prints.
admin="$(sed -n 's/^ *admin credential: //p' "$work/serve.out")"
db="$url/database/1/iCloud.com.example.app/development/private"
auth="ckAPIToken=$api&ckWebAuthToken=$web"

# The record the lookups fetch.
curl -sf "$db/records/modify?$auth" \
    -d '{"operations":[{"operationType":"forceReplace","record":{"recordName":"bench-lookup","recordType":"Bench","fields":{"title":{"value":"hello, cloudlet"},"n":{"value":1}}}}]}' \
    >/dev/null

# SHARED=1: alice also shares a zone (a zone-wide READ_ONLY share) before the runs, so every private-database request
# pays what sharing adds to the single-user paths (issue 17: within 5 % of SHARED=0 with the same binary).
if [[ "${SHARED:-0}" == 1 ]]; then
    curl -sf "$db/zones/modify?$auth" -d '{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"Open"}}}]}' >/dev/null
    curl -sf "$db/records/modify?$auth" \
        -d '{"zoneID":{"zoneName":"Open"},"operations":[{"operationType":"create","record":{"recordName":"o1","recordType":"Trip","fields":{"title":{"value":"Lisbon"}}}},{"operationType":"create","record":{"recordName":"cloudkit.zoneshare","recordType":"cloudkit.share","publicPermission":"READ_ONLY"}}]}' \
        | grep -q '"shortGUID"' || { echo "error: SHARED=1: the zone-wide share was not created" >&2; exit 1; }
fi

metric() { curl -sf -H "Authorization: Bearer $admin" "$url/cloudlet/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

# to_us, wrk_summary
source "$here/common.sh"

# The server's CPU time so far in clock ticks (user + system, all threads), and its context switches (voluntary and
# involuntary, summed over its threads): what a request costs the server, which a loaded machine disturbs far less
# than requests/s.
server_ticks() { awk '{ print $14 + $15 }' "/proc/$server_pid/stat"; }
server_switches() { cat /proc/"$server_pid"/task/*/status 2>/dev/null | awk '/ctxt_switches/ { s += $2 } END { print s + 0 }'; }
ticks_per_second="$(getconf CLK_TCK)"
costs="$work/costs.txt"  # route conns round cpu-µs-per-request switches-per-request

# run NAME CONNS URL SCRIPT WARMUP_ARG ARG ROUND: a warm-up and a measured wrk run (the script gets WARMUP_ARG,
# then ARG); prints "rps p50us p99us errors", and appends the server's cost per request to $costs.
run() {
    local name="$1" conns="$2" target="$3" script="$4" warm_arg="$5" arg="$6" round="$7"
    local threads=$((conns < 2 ? 1 : 2))
    wrk -t"$threads" -c"$conns" -d"${warmup}s" -s "$here/$script" "$target" -- "$warm_arg" >/dev/null
    local out="$work/wrk-$name-$conns-$round.txt"
    local t0 s0 t1 s1
    t0="$(server_ticks)"; s0="$(server_switches)"
    wrk -t"$threads" -c"$conns" -d"${duration}s" --latency -s "$here/$script" "$target" -- "$arg" >"$out"
    t1="$(server_ticks)"; s1="$(server_switches)"
    local requests
    requests="$(awk '/ requests in / { print $1 }' "$out")"
    awk -v n="$name" -v c="$conns" -v r="$round" -v t=$((t1 - t0)) -v hz="$ticks_per_second" -v s=$((s1 - s0)) -v q="${requests:-0}" \
        'BEGIN { if (q > 0) printf "%s %s %s %.1f %.2f\n", n, c, r, t * 1e6 / hz / q, s / q }' >>"$costs"
    wrk_summary "$out"
}

echo "cloudlet serve ($durability) at $url; wrk ${duration}s per run after ${warmup}s warm-up, $rounds rounds;" \
    "$(nproc) cores shared by server and wrk; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
results="$work/results.txt"  # route conns rps p50 p99 errors records-per-fsync
for round in $(seq 1 "$rounds"); do
    for c in $connections; do
        echo "health $c $(run health "$c" "$url/cloudlet/health" health.lua - - "$round") -" >>"$results"
        echo "lookup $c $(run lookup "$c" "$db/records/lookup?$auth" lookup.lua bench-lookup bench-lookup "$round") -" >>"$results"
        commits0="$(metric cloudlet_store_commits_total)"; fsyncs0="$(metric cloudlet_store_fsyncs_total)"
        # Record names: <run>-<wrk thread>-<n>, a new <run> for every run, so every request creates a record.
        m="$(run modify "$c" "$db/records/modify?$auth" modify.lua "warm$c-$round" "m$c-$round" "$round")"
        commits1="$(metric cloudlet_store_commits_total)"; fsyncs1="$(metric cloudlet_store_fsyncs_total)"
        rpf="$(awk -v c=$((commits1 - commits0)) -v f=$((fsyncs1 - fsyncs0)) 'BEGIN { if (f > 0) printf "%.1f", c / f; else print "-" }')"
        echo "modify $c $m $rpf" >>"$results"
        echo "round $round, $c connections: done" >&2
    done
done

# median COLUMN ROUTE CONNS [FILE]
median() {
    awk -v col="$1" -v r="$2" -v c="$3" '$1 == r && $2 == c { print $col }' "${4:-$results}" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
errors() { awk -v r="$1" -v c="$2" '$1 == r && $2 == c { s += $6 } END { print s + 0 }' "$results"; }

label() {
    case "$1" in
    health) echo "GET /cloudlet/health (ceiling)" ;;
    lookup) echo "records/lookup, 1 record" ;;
    modify) echo "records/modify, 1 create ($durability)" ;;
    esac
}
printf '| route | connections | requests/s | p50 | p99 | vs health | errors | records/fsync | server CPU/request | switches/request | CPU vs health |\n'
printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for c in $connections; do
    ceiling="$(median 3 health "$c")"
    ceiling_cpu="$(median 4 health "$c" "$costs")"
    for r in health lookup modify; do
        rps="$(median 3 "$r" "$c")"
        rpf="-"
        [[ "$r" == modify ]] && rpf="$(median 7 "$r" "$c")"
        cpu="$(median 4 "$r" "$c" "$costs")"
        printf '| %s | %s | %.0f | %.0f µs | %.0f µs | %.2f | %s | %s | %.1f µs | %.2f | %.2f |\n' "$(label "$r")" "$c" "$rps" \
            "$(median 4 "$r" "$c")" "$(median 5 "$r" "$c")" "$(awk -v a="$rps" -v b="$ceiling" 'BEGIN { print a / b }')" \
            "$(errors "$r" "$c")" "$rpf" "$cpu" "$(median 5 "$r" "$c" "$costs")" \
            "$(awk -v a="$cpu" -v b="$ceiling_cpu" 'BEGIN { if (a > 0) print b / a; else print 0 }')"
    done
done
echo "raw wrk output and the access log: $work (KEEP=1 to keep it)" >&2

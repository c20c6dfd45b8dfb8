#!/usr/bin/env bash
# replicated-fillsync-concurrent with wrk: records/modify (one create per request, 32 connections) against the leader
# of a 3-node `cloudlet serve --cluster … --ack quorum` cluster (one etcd coordinates it), next to one
# `cloudlet serve` (no cluster) and a 3-member etcd cluster (PUT /v3/kv/put of a ~200-byte value through its
# gateway: majority-fsynced, the same guarantee). Every process is real, on loopback, started fresh per cell;
# rounds are interleaved. Prints records/s, p50 and p99 per cell (median over the rounds).
#
# A quick stand-in for `cloudlet-bench --filter replicated-fillsync-concurrent` that needs only a `cloudlet`
# executable, and compares several: BINS="before=/tmp/a/cloudlet after=.build/release/cloudlet" measures each
# build's cluster and single node in the same session (default: this checkout's release build).
#
# Environment: BINS, DURATION (seconds per run, default 10), WARMUP (default 2), ROUNDS (default 2),
# CONNECTIONS (default 32), ETCD=0 leaves the etcd anchor out, KEEP=1 keeps the work directory, CPU=1 adds a
# table of the CPU time (user + system, from /proc/PID/stat and wrk's rusage) each process spent per acknowledged
# write in the measured run: leader, followers, the coordinating etcd, one node, etcd members and wrk itself. On a
# machine whose cores are all busy, throughput is bounded by that total, and it is far less load-sensitive than
# records/s.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
duration="${DURATION:-10}"
warmup="${WARMUP:-2}"
rounds="${ROUNDS:-2}"
conns="${CONNECTIONS:-32}"
bins="${BINS:-release=$root/.build/release/cloudlet}"
command -v wrk >/dev/null && [[ -x /usr/bin/etcd ]] || { echo "error: needs wrk and etcd (.ci/install-deps)" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/cloudlet-cluster-bench.XXXXXX")"
pids=()
stop_all() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
}
cleanup() {
    stop_all
    if [[ "${KEEP:-0}" == 1 ]]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# etcd_cluster DIR MEMBERS: starts etcd members (in this shell, so that stop_all knows them); sets etcd_url to the
# first member's client URL once all serve.
etcd_cluster() {
    local dir="$1" n="$2" initial="" clients=() peers=()
    for m in $(seq 0 $((n - 1))); do
        clients[m]="http://127.0.0.1:$(free_port)"
        peers[m]="http://127.0.0.1:$(free_port)"
        initial+="${initial:+,}e$m=${peers[m]}"
    done
    for m in $(seq 0 $((n - 1))); do
        /usr/bin/etcd --name "e$m" --data-dir "$dir/etcd$m" --listen-client-urls "${clients[m]}" \
            --advertise-client-urls "${clients[m]}" --listen-peer-urls "${peers[m]}" \
            --initial-advertise-peer-urls "${peers[m]}" --initial-cluster "$initial" --initial-cluster-state new \
            >"$dir/etcd$m.log" 2>&1 &
        pids+=($!)
    done
    for _ in $(seq 1 600); do
        local ok=1
        for m in $(seq 0 $((n - 1))); do grep -q 'serving .*client' "$dir/etcd$m.log" 2>/dev/null || ok=0; done
        [[ $ok == 1 ]] && break
        sleep 0.1
    done
    etcd_url="${clients[0]}"
}

# credentials DIR: the ckAPIToken/ckWebAuthToken query the first leader printed.
credentials() {
    for _ in $(seq 1 1200); do
        local api web
        api="$(sed -n 's/^ *ckAPIToken: //p' "$1"/*.out | head -n 1)"
        web="$(sed -n 's/^ *ckWebAuthToken: //p' "$1"/*.out | head -n 1)"
        if [[ -n "$api" && -n "$web" ]]; then echo "ckAPIToken=$api&ckWebAuthToken=$web"; return; fi
        sleep 0.1
    done
    echo "error: no credentials printed in $1" >&2
    return 1
}

# leader URL...: the node whose status says it leads every log.
leader() {
    for _ in $(seq 1 600); do
        for u in "$@"; do
            if curl -sf "$u/cloudlet/cluster/status" | python3 -c '
import json, sys
s = json.load(sys.stdin)
sys.exit(0 if s["partitions"] and all(p["role"] == "leader" for p in s["partitions"]) else 1)' 2>/dev/null; then
                echo "$u"
                return
            fi
        done
        sleep 0.1
    done
    echo "error: no leader" >&2
    return 1
}

# to_us, wrk_summary
source "$here/common.sh"

# ticks PID: user + system CPU time of a process so far, in clock ticks (0 once it is gone).
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# role PID LEADER-URL: what a started process is in the CPU table — leader, follower, node (no cluster), etcd.
role() {
    local args
    args="$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)" || return 0
    case "$args" in
    *" serve "*--cluster*) if [[ -n "$2" && "$args" == *"--port ${2##*:} "* ]]; then echo leader; else echo follower; fi ;;
    *" serve "*) echo node ;;
    *) echo etcd ;;
    esac
}

# measure NAME URL SCRIPT ARG [LEADER-URL]: a warm-up and a measured run; prints "rps p50us p99us errors". With
# CPU=1 it also appends to $cpu one line per process started for the cell (and one for wrk): "NAME ROLE µs", the
# CPU time (user + system) it used per request of the measured run.
measure() {
    local name="$1" target="$2" script="$3" arg="$4" lead="${5:-}" out="$work/wrk-$1.txt"
    wrk -t2 -c"$conns" -d"${warmup}s" -s "$here/$script" "$target" -- "warm-$arg" >/dev/null
    local before=() p i
    for p in "${pids[@]}"; do before+=("$(ticks "$p")"); done
    /usr/bin/time -f '%U %S' -o "$out.time" \
        wrk -t2 -c"$conns" -d"${duration}s" --latency -s "$here/$script" "$target" -- "$arg" >"$out"
    grep -q '^Requests/sec:' "$out" || echo "warning: $name: wrk measured nothing; its output: $(tr '\n' ' ' <"$out")" >&2
    if [[ "${CPU:-0}" == 1 ]]; then
        local requests tick_us=$((1000000 / $(getconf CLK_TCK)))
        requests="$(awk '/ requests in / { print $1 }' "$out")"
        if [[ "${requests:-0}" -gt 0 ]]; then
            for i in "${!pids[@]}"; do
                p="${pids[i]}"
                echo "${name%-*} ${name##*-} $(role "$p" "$lead") $(( ($(ticks "$p") - before[i]) * tick_us / requests ))" >>"$cpu"
            done
            awk -v n="${name%-*}" -v k="${name##*-}" -v r="$requests" '{ printf "%s %s wrk %d\n", n, k, ($1 + $2) * 1000000 / r }' \
                "$out.time" >>"$cpu"
        fi
    fi
    wrk_summary "$out"
}

results="$work/results.txt"  # cell rps p50 p99 errors
cpu="$work/cpu.txt"  # cell round role µs-per-request, one line per process and run (CPU=1)
db=database/1/iCloud.com.example.app/development/private
echo "wrk ${duration}s per run after ${warmup}s, $conns connections, $rounds rounds; $(nproc) cores;" \
    "load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for round in $(seq 1 "$rounds"); do
    for entry in $bins; do
        label="${entry%%=*}"
        bin="${entry#*=}"
        # The cluster: one etcd coordinating three nodes.
        d="$work/$label-cluster-$round"
        mkdir -p "$d"
        etcd_cluster "$d" 1
        coordinator="$etcd_url"
        urls=()
        for n in 1 2 3; do
            port="$(free_port)"
            urls+=("http://127.0.0.1:$port")
            "$bin" serve --data "$d/n$n" --port "$port" --cluster "${coordinator/http:/etcd:}" --node "n$n" --ack quorum \
                >"$d/n$n.out" 2>"$d/n$n.err" &
            pids+=($!)
        done
        auth="$(credentials "$d")"
        lead="$(leader "${urls[@]}")"
        echo "$label-cluster $(measure "$label-cluster-$round" "$lead/$db/records/modify?$auth" modify.lua "c$round" "$lead")" >>"$results"
        stop_all
        # One node.
        d="$work/$label-single-$round"
        mkdir -p "$d"
        port="$(free_port)"
        "$bin" serve --data "$d/data" --port "$port" >"$d/n.out" 2>"$d/n.err" &
        pids+=($!)
        auth="$(credentials "$d")"
        echo "$label-single $(measure "$label-single-$round" "http://127.0.0.1:$port/$db/records/modify?$auth" modify.lua "s$round")" >>"$results"
        stop_all
        echo "round $round, $label: done" >&2
    done
    if [[ "${ETCD:-1}" == 1 ]]; then
        d="$work/etcd-$round"
        mkdir -p "$d"
        etcd_cluster "$d" 3
        echo "etcd-3 $(measure "etcd-$round" "$etcd_url/v3/kv/put" etcd-put.lua "e$round")" >>"$results"
        stop_all
        echo "round $round, etcd: done" >&2
    fi
done

median() {
    awk -v col="$1" -v r="$2" '$1 == r { print $col }' "$results" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
printf '| target | records/s | p50 | p99 | errors |\n|---|---:|---:|---:|---:|\n'
for cell in $(awk '{ print $1 }' "$results" | awk '!seen[$0]++'); do
    printf '| %s | %.0f | %.1f ms | %.1f ms | %s |\n' "$cell" "$(median 2 "$cell")" \
        "$(awk -v v="$(median 3 "$cell")" 'BEGIN { print v / 1000 }')" \
        "$(awk -v v="$(median 4 "$cell")" 'BEGIN { print v / 1000 }')" \
        "$(awk -v r="$cell" '$1 == r { s += $5 } END { print s + 0 }' "$results")"
done

if [[ "${CPU:-0}" == 1 && -s "$cpu" ]]; then
    # Per cell: each role's CPU µs per acknowledged write (the median over the rounds and over the processes of
    # that role: two followers, three etcd members), and the total over all the cell's processes (median over rounds).
    printf '\n| target | CPU µs per write, per process | total |\n|---|---|---:|\n'
    for cell in $(awk '{ print $1 }' "$cpu" | awk '!seen[$0]++'); do
        per="$(awk -v c="$cell" '$1 == c { print $3 }' "$cpu" | awk '!seen[$0]++' | while read -r r; do
            printf '%s %s · ' "$r" "$(awk -v c="$cell" -v r="$r" '$1 == c && $3 == r { print $4 }' "$cpu" | sort -g |
                awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')"
        done)"
        total="$(awk -v c="$cell" '$1 == c { s[$2] += $4 } END { for (k in s) print s[k] }' "$cpu" | sort -g |
            awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"
        printf '| %s | %s | %.0f |\n' "$cell" "${per% · }" "$total"
    done
fi

# Sourced by run.sh and cluster.sh: reading wrk's output.

# to_us VALUE: wrk's "123.45us" / "1.23ms" / "1.02s" in microseconds.
to_us() {
    awk -v v="$1" 'BEGIN {
        if (v ~ /us$/) { sub(/us$/, "", v); printf "%.0f", v }
        else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.0f", v * 1000 }
        else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.0f", v * 1000000 }
        else printf "?" }'
}

# wrk_summary FILE: "requests/s p50-µs p99-µs errors" of a `wrk --latency` run with common.lua (errors: answers
# that were not a clean 200, counted by the script, plus wrk's non-2xx and socket errors, timeouts included).
wrk_summary() {
    local rps p50 p99 errors non2xx socket
    rps="$(awk '/^Requests\/sec:/ { print $2 }' "$1")"
    p50="$(to_us "$(awk '$1 == "50%" { print $2 }' "$1")")"
    p99="$(to_us "$(awk '$1 == "99%" { print $2 }' "$1")")"
    errors="$(awk '/^record errors:/ { print $3 }' "$1")"
    non2xx="$(awk '/Non-2xx/ { print $NF }' "$1")"
    # "Socket errors: connect 0, read 0, write 0, timeout 12": requests that got no answer at all.
    socket="$(awk '/Socket errors:/ { gsub(",", ""); print $4 + $6 + $8 + $10 }' "$1")"
    echo "${rps:-0} $p50 $p99 $((${errors:-0} + ${non2xx:-0} + ${socket:-0}))"
}

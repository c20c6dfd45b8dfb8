#!/usr/bin/env python3
"""Held connections against a running `cloudlet serve`: what N idle or half-sent connections cost the server, and
whether a new client is still served while they are open.

For each count N it opens N connections (spread over the source addresses 127.0.0.2-127.0.0.201, so that a per-peer
connection cap does not refuse them), each of which sends half a request and then nothing (slowloris) — or, with
--mode idle, a whole request whose answer it reads and then stays open (a keep-alive); measures the server's RSS
(from /proc/PID/status) before and after, then times a fresh client's GET /cloudlet/health (5 s limit) and reports
it. Prints one line per count, or JSON with --json.

    Benchmarks/http/connections.py --port 8080 --pid 1234 --counts 1000,5000,10000
"""
import argparse
import json
import resource
import socket
import sys
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fresh_request(port, timeout=5.0):
    start = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        s.sendall(b"GET /cloudlet/health HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
        s.close()
        ok = data.startswith(b"HTTP/1.1 200")
        return (time.monotonic() - start) * 1000, ok
    except OSError:
        return (time.monotonic() - start) * 1000, False


def open_held(port, n, mode):
    held = []
    for i in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((f"127.0.0.{2 + i % 200}", 0))
        s.setblocking(True)
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", port))
            if mode == "slowloris":
                s.sendall(b"GET /cloudlet/health HTTP/1.1\r\nHost: bench\r\nX-Slow: ")
            else:
                s.sendall(b"GET /cloudlet/health HTTP/1.1\r\nHost: bench\r\n\r\n")
                s.recv(65536)
        except OSError:
            s.close()
            continue
        held.append(s)
    return held


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True, help="the server's process id (for its RSS)")
    p.add_argument("--counts", default="1000,5000", help="comma-separated connection counts")
    p.add_argument("--mode", choices=["slowloris", "idle"], default="slowloris")
    p.add_argument("--json", action="store_true", help="print JSON")
    a = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    rows = []
    for n in [int(x) for x in a.counts.split(",") if x]:
        before = rss_kib(a.pid)
        t0 = time.monotonic()
        held = open_held(a.port, n, a.mode)
        opened = time.monotonic() - t0
        time.sleep(1.0)
        after = rss_kib(a.pid)
        latency, ok = fresh_request(a.port)
        rows.append({
            "mode": a.mode, "connections": len(held), "asked": n, "open_seconds": round(opened, 2),
            "rss_before_kib": before, "rss_after_kib": after,
            "rss_per_connection_bytes": round((after - before) * 1024 / max(len(held), 1)),
            "new_client_ms": round(latency, 2), "new_client_ok": ok,
        })
        for s in held:
            s.close()
        time.sleep(1.0)
    if a.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            print(f"{r['mode']:9} {r['connections']:6} held  RSS {r['rss_before_kib']} -> {r['rss_after_kib']} KiB "
                  f"({r['rss_per_connection_bytes']} B/conn)  new client: {'ok' if r['new_client_ok'] else 'FAILED'} "
                  f"in {r['new_client_ms']} ms")


if __name__ == "__main__":
    sys.exit(main())

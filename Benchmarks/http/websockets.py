#!/usr/bin/env python3
"""records/lookup latency while N websocket notification clients are open on a fresh `cloudlet serve`.

Starts the given `cloudlet` binary on a temporary store, creates the record the lookups fetch and a courier token
(`tokens/create`), then for each N opens N websockets to /cloudlet/notifications/ws (from 200 loopback source
addresses, so a per-peer connection cap does not refuse them; the fd limit is raised to the hard limit), checks each
got `101`, runs `wrk -t1 -c1` with lookup.lua for DURATION seconds and reports requests/s, p50 and p99 next to the
N = 0 row measured first, and the server's RSS per open websocket. Also the CPU time the server used, by thread,
between the last websocket's `101` and wrk (SETTLE seconds) and during wrk, and this process's own CPU during wrk
(it holds the websockets: a holder that woke up would compete with the server for the cores). Prints a table, or
JSON (every thread's CPU) with --json. --rt PRIO runs the server and wrk at SCHED_FIFO priority, so that on a shared
machine the other processes do not set the p99 (what is left is the server's own doing). A count written xN holds N
idle loopback connections to a listener of this process instead of websockets to the server: the same number of
sockets on the machine with none of them the server's, the anchor for the N-websocket row (docs/front-end.md).

    Benchmarks/http/websockets.py --cloudlet .build/release/cloudlet --clients 0,1000,5000 --duration 5
"""
import argparse
import json
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from connections import rss_kib  # noqa: E402  (next to this file)


def start(cloudlet, work, extra):
    out = open(os.path.join(work, "serve.out"), "w+")
    err = open(os.path.join(work, "access.log"), "w")
    proc = subprocess.Popen([cloudlet, "serve", "--data", os.path.join(work, "data"), "--port", "0",
                             "--durability", "os"] + extra, stdout=out, stderr=err)
    for _ in range(200):
        out.seek(0)
        text = out.read()
        m = re.search(r"^listening on (\S+)", text, re.M)
        if m:
            api = re.search(r"ckAPIToken: (\S+)", text).group(1)
            web = re.search(r"ckWebAuthToken: (\S+)", text).group(1)
            return proc, m.group(1), api, web
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("error: the server did not start")


def thread_cpu_ms(pid):
    """CPU time (user + system, ms) of each of `pid`'s threads, by thread name (threads of one name summed)."""
    tick = 1000.0 / os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue  # the thread ended
        fields = stat[stat.rindex(")") + 2:].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) * tick
    return out


def cpu_delta(before, after):
    return {k: round(v - before.get(k, 0.0), 1) for k, v in after.items() if v - before.get(k, 0.0) > 0}


def post(url, body):
    req = urllib.request.Request(url, data=body.encode(), method="POST")
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())


def open_websockets(port, token, n):
    held = []
    for i in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((f"127.0.0.{2 + i % 200}", 0))
        s.settimeout(10)
        s.connect(("127.0.0.1", port))
        s.sendall((f"GET /cloudlet/notifications/ws?token={token} HTTP/1.1\r\nHost: bench\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                   "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            d = s.recv(4096)
            if not d:
                break
            head += d
        if not head.startswith(b"HTTP/1.1 101"):
            raise SystemExit(f"error: websocket {i} was refused: {head[:200]!r}")
        held.append(s)
    return held


ACCEPTOR = """
import socket, sys
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.bind(("127.0.0.1", 0))
listener.listen(4096)
print(listener.getsockname()[1], flush=True)
held = []
while True:
    held.append(listener.accept()[0])
"""


class Elsewhere:
    """N idle loopback connections to a listener of a child process (which accepts and holds its ends; this process
    holds the others: the fd limit is per process), not to the server: the machine's own cost of N more open
    connections with the server holding none of them (the anchor row `xN`)."""

    def __init__(self, n):
        self.child = subprocess.Popen([sys.executable, "-c", ACCEPTOR], stdout=subprocess.PIPE, text=True)
        port = int(self.child.stdout.readline())
        self.held = []
        for i in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((f"127.0.0.{2 + i % 200}", 0))
            s.connect(("127.0.0.1", port))
            self.held.append(s)

    def close(self):
        for s in self.held:
            s.close()
        self.child.kill()
        self.child.wait()


def wrk_lookup(url, duration, rt=None):
    command = ["wrk", "-t1", "-c1", f"-d{duration}s", "--latency", "-s", os.path.join(HERE, "lookup.lua"), url, "--",
               "bench-lookup"]
    out = subprocess.run((["chrt", "-f", str(rt)] if rt else []) + command, capture_output=True, text=True,
                         check=True).stdout

    def us(v):
        for suffix, scale in (("us", 1), ("ms", 1000), ("s", 1000000)):
            if v.endswith(suffix):
                return float(v[: -len(suffix)]) * scale
        return float("nan")

    rps = float(re.search(r"^Requests/sec:\s+(\S+)", out, re.M).group(1))
    p50 = us(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))
    p99 = us(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))
    errors = int(re.search(r"record errors: (\d+)", out).group(1))
    return rps, p50, p99, errors


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cloudlet", required=True, help="the cloudlet binary to start")
    p.add_argument("--clients", default="0,1000,5000", help="comma-separated websocket counts (0 first: the anchor); "
                   "xN holds N idle connections to another listener of this process instead (the server holds none: "
                   "what N more loopback connections cost the machine, the anchor for the N-websocket row)")
    p.add_argument("--duration", type=int, default=5, help="seconds of wrk per row")
    p.add_argument("--serve-arg", action="append", default=[], help="extra argument for `cloudlet serve`")
    p.add_argument("--rt", type=int, help="run the server and wrk at this SCHED_FIFO priority (root; a shared "
                   "machine's other processes then do not set the p99)")
    p.add_argument("--settle", type=float, default=1.0, help="seconds between the last websocket and wrk")
    p.add_argument("--json", action="store_true", help="print JSON")
    a = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # inherited by the xN rows' acceptor
    rows = []
    with tempfile.TemporaryDirectory(prefix="cloudlet-ws-bench.") as work:
        proc, url, api, web = start(a.cloudlet, work, a.serve_arg)
        try:
            port = int(url.rsplit(":", 1)[1])
            db = f"{url}/database/1/iCloud.com.example.app/development/private"
            auth = f"ckAPIToken={api}&ckWebAuthToken={web}"
            post(f"{db}/records/modify?{auth}", '{"operations":[{"operationType":"forceReplace","record":'
                 '{"recordName":"bench-lookup","recordType":"Bench","fields":{"title":{"value":"hello"}}}}]}')
            token = post(f"{db}/tokens/create?{auth}", "{}")["apnsToken"]
            lookup = f"{db}/records/lookup?{auth}"
            if a.rt:  # every thread of the server, those it starts later included (they inherit it)
                subprocess.run(["chrt", "-a", "-f", "-p", str(a.rt), str(proc.pid)], check=True)
            wrk_lookup(lookup, 1, a.rt)  # warm-up
            for spec in [x for x in a.clients.split(",") if x]:
                elsewhere = spec.startswith("x")
                n = int(spec.lstrip("x"))
                before = rss_kib(proc.pid)
                held = [Elsewhere(n)] if elsewhere else open_websockets(port, token, n)
                settle0 = thread_cpu_ms(proc.pid)
                time.sleep(a.settle)
                after = rss_kib(proc.pid)
                cpu0, own0 = thread_cpu_ms(proc.pid), os.times()
                rps, p50, p99, errors = wrk_lookup(lookup, a.duration, a.rt)
                cpu1, own1 = thread_cpu_ms(proc.pid), os.times()
                rows.append({"websockets": 0 if elsewhere else n, "connections_elsewhere": n if elsewhere else 0,
                             "lookup_rps": rps, "p50_us": p50, "p99_us": p99, "errors": errors,
                             "rss_per_websocket_bytes": round((after - before) * 1024 / n) if n and not elsewhere else None,
                             # CPU over the settle pause and over wrk, by server thread; the holder's own CPU
                             # (this process, which holds the websockets) over wrk.
                             "server_cpu_settle_ms": cpu_delta(settle0, cpu0),
                             "server_cpu_wrk_ms": cpu_delta(cpu0, cpu1),
                             "holder_cpu_wrk_ms": round((own1.user + own1.system - own0.user - own0.system) * 1000, 1)})
                for s in held:
                    s.close()
                time.sleep(1.0)
        finally:
            proc.terminate()
            proc.wait()
    anchor = rows[0]["p99_us"] if rows else float("nan")
    if a.json:
        print(json.dumps(rows, indent=2))
        return
    print("| websockets open (xN: N connections held to another listener) | lookup req/s | p50 | p99 | p99 vs first row | errors | RSS per websocket | "
          "server CPU in the settle | holder CPU in wrk |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        per = "-" if r["rss_per_websocket_bytes"] is None else f"{r['rss_per_websocket_bytes']} B"
        settle = sum(r["server_cpu_settle_ms"].values())
        what = f"x{r['connections_elsewhere']}" if r["connections_elsewhere"] else f"{r['websockets']}"
        print(f"| {what} | {r['lookup_rps']:.0f} | {r['p50_us']:.0f} µs | {r['p99_us']:.0f} µs | "
              f"{r['p99_us'] / anchor:.2f} | {r['errors']} | {per} | {settle:.0f} ms | "
              f"{r['holder_cpu_wrk_ms']:.0f} ms |")


if __name__ == "__main__":
    sys.exit(main())

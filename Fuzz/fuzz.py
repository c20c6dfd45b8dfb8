#!/usr/bin/env python3
"""Builds Cloudlet's libFuzzer targets (Fuzz/Package.swift) and runs each for a while over its seed corpus.

    Fuzz/fuzz.py [--seconds N] [--no-build] [--json] [TARGET ...]

TARGETs are frame, record, predicate, schema, tokens and api (default: all). Each runs for --seconds (default 5)
over Fuzz/Corpus/<target> plus the inputs earlier runs found (.build/fuzz/corpus/<target>, kept between runs, not
checked in). A crash, an invariant broken or an undocumented error type leaves the input in .build/fuzz/artifacts/
(<target>-crash-<sha1>) and fails the run: reproduce it with `<binary> <file>`, fix the code, and add a regression test to
the main test suite (docs/fuzzing.md). Prints executions, coverage and crashes per target; exits 1 on any crash.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGETS = ["frame", "record", "predicate", "schema", "tokens", "api"]
# Coverage instrumentation for libFuzzer and AddressSanitizer, for every module (Package.swift says why
# -sanitize=fuzzer itself is left to the targets' link).
SWIFT_FLAGS = ["-Xswiftc", "-sanitize=address", "-Xswiftc",
               "-sanitize-coverage=edge,trace-cmp,indirect-calls,inline-8bit-counters,pc-table"]
ENV = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0", "SWIFT_BACKTRACE": "enable=no"}


def build(targets, extra):
    for t in targets:
        started = time.time()
        command = ["swift", "build", "--package-path", HERE, "--product", f"fuzz-{t}", *SWIFT_FLAGS, *extra]
        result = subprocess.run(command, env=ENV, capture_output=True, text=True)
        if result.returncode != 0:
            lines = [l for l in (result.stdout + result.stderr).splitlines() if "Cannot export local symbol" not in l]
            sys.stderr.write("\n".join(lines[-40:]) + "\n")
            sys.exit(f"error: building fuzz-{t} failed")
        print(f"built fuzz-{t} in {time.time() - started:.0f} s", file=sys.stderr)
    out = subprocess.run(["swift", "build", "--package-path", HERE, *SWIFT_FLAGS, *extra, "--show-bin-path"],
                         env=ENV, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def run(binary, target, seconds, work):
    corpus = os.path.join(work, "corpus", target)
    artifacts = os.path.join(work, "artifacts")
    os.makedirs(corpus, exist_ok=True)
    os.makedirs(artifacts, exist_ok=True)
    prefix = f"{target}-"  # crash files are <target>-crash-<sha1> (also -timeout-, -oom-, -leak-)
    before = set(os.listdir(artifacts))
    command = [binary, f"-max_total_time={seconds}", "-timeout=30", "-rss_limit_mb=4096", "-print_final_stats=1",
               "-detect_leaks=0", f"-artifact_prefix={os.path.join(artifacts, prefix)}", corpus, os.path.join(HERE, "Corpus", target)]
    # The api target's store goes in a temp directory of its own, removed after the run even when the target
    # crashed (its own clean-up at exit does not run after a trap).
    scratch = os.path.join(work, "tmp", target)
    os.makedirs(scratch, exist_ok=True)
    started = time.time()
    try:
        result = subprocess.run(command, env={**ENV, "TMPDIR": scratch}, capture_output=True, text=True,
                                timeout=seconds + 300)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    log = result.stderr
    stats = dict(re.findall(r"stat::(\w+):\s+(\d+)", log))
    coverage = re.findall(r"cov: (\d+) ft: (\d+)", log)
    found = sorted(a for a in set(os.listdir(artifacts)) - before if a.startswith(prefix))
    problem = None
    if result.returncode != 0:
        reason = re.search(r"(Fatal error: .*|invariant broken: .*|ERROR: \w+: .*|==\d+== ERROR: .*)", log)
        problem = reason.group(1) if reason else f"exit status {result.returncode}"
        with open(os.path.join(work, f"{target}.log"), "w") as f:
            f.write(log)
    return {
        "target": target,
        "seconds": round(time.time() - started, 1),
        "executions": int(stats.get("number_of_executed_units", 0)),
        "executionsPerSecond": int(stats.get("average_exec_per_sec", 0)),
        "coverage": int(coverage[-1][0]) if coverage else 0,
        "features": int(coverage[-1][1]) if coverage else 0,
        "corpus": len(os.listdir(corpus)),
        "crashes": [os.path.join(artifacts, a) for a in found],
        "problem": problem,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", metavar="TARGET", help=f"of {', '.join(TARGETS)} (default: all)")
    parser.add_argument("--seconds", type=int, default=5, help="how long each target runs (default: %(default)s)")
    parser.add_argument("--no-build", action="store_true", help="run the binaries of the last build")
    parser.add_argument("--work", default=os.path.join(ROOT, ".build", "fuzz"),
                        help="corpus and crash directory (default: %(default)s)")
    parser.add_argument("--swiftpm-flags", default=os.environ.get("SWIFTPM_FLAGS", ""),
                        help="extra flags for swift build (default: $SWIFTPM_FLAGS)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    for t in args.targets:
        if t not in TARGETS:
            parser.error(f"unknown target '{t}' (targets: {', '.join(TARGETS)})")
    targets = args.targets or TARGETS
    extra = args.swiftpm_flags.split()
    if args.no_build:
        bin_path = subprocess.run(["swift", "build", "--package-path", HERE, *SWIFT_FLAGS, *extra, "--show-bin-path"],
                                  env=ENV, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    else:
        bin_path = build(targets, extra)
    results = []
    for t in targets:
        r = run(os.path.join(bin_path, f"fuzz-{t}"), t, args.seconds, args.work)
        results.append(r)
        if not args.json:
            status = "ok" if not r["problem"] else f"CRASH: {r['problem']}"
            print(f"fuzz-{t:<10} {r['executions']:>10} executions in {r['seconds']:>6} s ({r['executionsPerSecond']}/s), "
                  f"coverage {r['coverage']}, corpus {r['corpus']}: {status}")
            for c in r["crashes"]:
                print(f"    input: {c}  (reproduce: {os.path.join(bin_path, 'fuzz-' + t)} {c})")
    if args.json:
        print(json.dumps(results, indent=2))
    sys.exit(1 if any(r["problem"] or r["crashes"] for r in results) else 0)


if __name__ == "__main__":
    main()

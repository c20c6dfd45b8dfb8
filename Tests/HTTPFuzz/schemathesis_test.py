#!/usr/bin/env python3
"""Schema-driven HTTP fuzz of `cloudlet serve` (docs/fuzzing.md): schemathesis generates requests from the CloudKit Web
Services OpenAPI description (Tests/HTTPFuzz/spec, or --spec) and sends them to a real server.

Starts `cloudlet serve --port 0` over a temporary data directory with an API token and a signed-in user filled in
(ckAPIToken, ckWebAuthToken), then, for every operation of the spec, sends --examples generated requests (a fixed
--seed: the same requests every run) and checks each answer: no 5xx, and status, content type and body shape as the
spec documents them, except where the spec is wrong about CloudKit (UNDOCUMENTED_ANSWERS, each with its reason). Exits 1 listing
every failure (with a curl command that reproduces it), 0 when there is none. Stops the server and removes its data
directory in every case.

    python3 Tests/HTTPFuzz/schemathesis_test.py [--examples N] [--seed S] [--json] [PATH-TO-cloudlet]
"""

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTAINER = "iCloud.com.example.fuzz"
sys.path.insert(0, os.path.join(ROOT, "Tests", "support"))
from cloudlet_serve import CloudletServer, cloudlet_binary  # noqa: E402
DEFAULT_SPEC = os.path.join(ROOT, "Tests", "HTTPFuzz", "spec", "cloudkit-web-services.openapi.yaml")


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


try:
    import hypothesis
    from hypothesis import HealthCheck, Phase, given, seed, settings
    import requests
    import schemathesis
    import yaml
    from schemathesis.checks import (content_type_conformance, not_a_server_error, response_schema_conformance,
                                     status_code_conformance)
except ImportError as e:
    fail(f"{e}: install schemathesis (pip install -r .ci/python-requirements.txt, or .ci/install-deps)")


def start_server(binary):
    try:
        return CloudletServer(binary, CONTAINER, "cloudlet-schemathesis-")
    except RuntimeError as e:
        fail(str(e))


# Answers the spec does not document for an operation although CloudKit gives them, each accepted narrowly: for one
# operation, one status and one serverErrorCode, with the reason. The spec (MistKit's description, kept unchanged) is
# wrong there; Apple's behaviour wins (spec/README.md). Only the status check is waived for such an answer:
# its content type and body shape are still checked.
UNDOCUMENTED_ANSWERS = {
    # Upload URLs name the zone of the record they are for (`zoneID`); CloudKit answers a zone that does not exist
    # with ZONE_NOT_FOUND, HTTP 404, on assets/upload as on every zone-scoped operation. The spec lists 200, 400 and
    # 401 only.
    ("POST assets/upload", 404, "ZONE_NOT_FOUND"): "an upload for a zone that does not exist",
}


def load_spec(path):
    """The spec, with one change made in memory (the file stays as it is): a list field's items are scalars, not
    lists. The spec lets `ListValue` contain itself, which CloudKit has no type for (there is no list of lists) and
    which the request generator cannot expand (an endless recursive reference)."""
    with open(path) as f:
        spec = yaml.safe_load(f)
    items = spec["components"]["schemas"]["ListValue"]["items"]
    items["oneOf"] = [s for s in items["oneOf"] if s.get("$ref") != "#/components/schemas/ListValue"]
    return spec


def run(server, spec, examples, seed_value):
    schema = schemathesis.from_dict(load_spec(spec), base_url=server.url)
    session = requests.Session()
    failures = []
    counts = {}
    checks = (not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance)
    for result in schema.get_all_operations():
        operation = result.ok()
        label = f"{operation.method.upper()} {operation.path.split('/{database}/')[-1]}"
        counts[label] = 0

        @seed(seed_value)
        @settings(max_examples=examples, deadline=None, database=None, derandomize=False, print_blob=False,
                  phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def test(case):
            case.path_parameters = {**(case.path_parameters or {}), "version": "1", "container": CONTAINER}
            case.query = {**(case.query or {}), "ckAPIToken": server.api_token, "ckWebAuthToken": server.alice}
            # Server-to-server keys are not what this fuzz is about: a generated key ID header only earns 401s.
            if case.headers:
                case.headers.pop("X-Apple-CloudKit-Request-KeyID", None)
            try:
                response = case.call(session=session, timeout=60)
            except Exception as e:  # no answer (a timeout, a closed connection): a failure, not the end of the run
                failures.append({"operation": label, "status": None,
                                 "message": f"no answer: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}",
                                 "response": "", "curl": case.as_curl_command()})
                return
            counts[label] += 1
            try:
                code = response.json().get("serverErrorCode") if response.status_code >= 400 else None
            except ValueError:
                code = None
            waived = (label, response.status_code, code) in UNDOCUMENTED_ANSWERS
            try:
                case.validate_response(response, checks=tuple(c for c in checks if not (waived and c is status_code_conformance)))
            except AssertionError as e:
                failures.append({
                    "operation": label, "status": response.status_code,
                    "message": " / ".join(line.strip() for line in str(e).strip().splitlines()[:6] if line.strip()),
                    "response": response.text[:400], "curl": case.as_curl_command()})
            if not server.alive():
                raise SystemExit(f"cloudlet serve exited while answering {label}")

        try:
            test()
        except SystemExit as e:
            failures.append({"operation": label, "status": None, "message": str(e), "response": "",
                             "curl": ""})
            break
    return counts, failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("binary", nargs="?", help="the cloudlet executable (default: swift build --show-bin-path)")
    parser.add_argument("--spec", default=DEFAULT_SPEC, help="the OpenAPI file (default: %(default)s)")
    parser.add_argument("--examples", type=int, default=60, help="requests per operation (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=19, help="hypothesis seed (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    if not os.path.exists(args.spec):
        fail(f"no OpenAPI file at {args.spec} (--spec)")

    started = time.time()
    server = start_server(cloudlet_binary(args.binary))
    try:
        counts, failures = run(server, args.spec, args.examples, args.seed)
        crashed = not server.alive()
    finally:
        server.stop()
    seconds = round(time.time() - started, 1)
    result = {"requests": sum(counts.values()), "operations": counts, "failures": failures, "seconds": seconds,
              "seed": args.seed, "serverCrashed": crashed,
              "undocumentedAnswers": [f"{k[0]}: {k[1]} {k[2]}" for k in UNDOCUMENTED_ANSWERS]}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for f in failures:
            print(f"FAIL {f['operation']} (HTTP {f['status']}): {f['message']}\n  {f['curl']}\n"
                  f"  {f['response']}")
        print(f"schemathesis: {result['requests']} requests over {len(counts)} operations in {seconds} s "
              f"(seed {args.seed}), {len(failures)} failures" + (", the server crashed" if crashed else ""))
    sys.exit(1 if failures or crashed else 0)


if __name__ == "__main__":
    main()

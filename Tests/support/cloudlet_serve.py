"""`cloudlet serve` as a child process for the Python test scripts (the console's browser test, the schemathesis
HTTP fuzz): a temporary store with an API token and user alice (and an admin credential when asked), the server on
a free loopback port, and its stop."""

import os
import re
import shutil
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cloudlet_binary(given_path=None):
    """The `cloudlet` executable: `given_path`, else the debug build's."""
    if given_path:
        return given_path
    bin_path = subprocess.run(["swift", "build", "--show-bin-path"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    return os.path.join(bin_path, "cloudlet")


class CloudletServer:
    """`cloudlet serve --host 127.0.0.1 --port 0 --durability os` over a temporary store. `url`, `api_token` (for
    `container`), `alice` (her web auth token), `admin` (with `admin=True`), `dir` (removed by `stop`). Raises
    RuntimeError when the server does not say where it listens."""

    def __init__(self, binary, container, prefix, admin=False):
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.process = None
        data = os.path.join(self.dir, "data")

        def last_line(*args):
            out = subprocess.run([binary, *args, "--data", data], capture_output=True, text=True, check=True).stdout
            return out.strip().splitlines()[-1]

        self.admin = last_line("token", "add", "--admin") if admin else None
        self.api_token = last_line("token", "add", "--container", container)
        self.alice = last_line("user", "add", "alice")
        # Its output (one access-log line per request) goes to a file: a pipe nobody reads once the address is known
        # fills up after ~64 KiB, and then every worker blocks writing its log line.
        self.log = os.path.join(self.dir, "serve.log")
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [binary, "serve", "--data", data, "--host", "127.0.0.1", "--port", "0", "--durability", "os"],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        self.url = None
        while time.time() < deadline and self.url is None and self.alive():
            with open(self.log) as log:
                m = re.search(r"listening on (http://\S+)", log.read())
            if m:
                self.url = m.group(1)
            else:
                time.sleep(0.1)
        if not self.url:
            self.stop()
            raise RuntimeError("cloudlet serve did not say where it listens")

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def stop(self):
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

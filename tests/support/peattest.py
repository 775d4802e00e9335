# SPDX-License-Identifier: MIT
"""What the Python end-to-end tests share: a list of checks that prints each result, `peat` runs
that stop the script on an unexpected exit status, the one-error-line check for bad input, and a
run measured for time and memory (hostile inputs must be refused fast and small)."""
import collections
import os
import subprocess
import sys
import tempfile
import threading
import time

Measured = collections.namedtuple("Measured", "rc stdout lines seconds cpu rss")


def measured(peat, args, env=None, timeout=60):
    """Runs peat ARGS, killed after TIMEOUT s: its exit code, standard output (bytes), standard error's
    non-blank lines, wall and CPU seconds, and the largest RSS in MiB of it and the helpers it waited for."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile("w+") as err:
        start = time.time()
        p = subprocess.Popen([peat, *map(str, args)], stdout=out, stderr=err, env=env)
        killer = threading.Timer(timeout, p.kill)
        killer.start()
        _, status, usage = os.wait4(p.pid, 0)
        killer.cancel()
        seconds = time.time() - start
        out.seek(0)
        err.seek(0)
        return Measured(os.waitstatus_to_exitcode(status), out.read(), [l.rstrip("\n") for l in err if l.strip()],
                        seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


class Harness:
    def __init__(self, peat, timeout=600):
        self.peat, self.timeout, self.failures = peat, timeout, []

    def check(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            self.failures.append(what)

    def run(self, *args, expect=0, env=None):
        """peat ARGS...; SystemExit naming the command when it exits other than `expect`."""
        p = subprocess.run([self.peat, *map(str, args)], capture_output=True, text=True, timeout=self.timeout, env=env)
        if p.returncode != expect:
            raise SystemExit(f"FAIL: peat {' '.join(map(str, args))} exited {p.returncode} (expected {expect}): "
                             f"{p.stdout[-800:]} {p.stderr[-2000:]}")
        return p

    def one_error(self, args, *needles):
        """Bad input: exit 1 and exactly one line, 'peat: error: ...', holding every needle."""
        lines = [l for l in self.run(*args, expect=1).stderr.splitlines() if l.strip()]
        ok = len(lines) == 1 and lines[0].startswith("peat: error: ") and all(n in lines[0] for n in needles)
        self.check(ok, f"{args[-1] if args else ''}: one error line with {needles}: {lines[:2]}")

    def exit(self):
        print(f"{len(self.failures)} failure(s)")
        raise SystemExit(1 if self.failures else 0)


def finish(failures):
    """The end of a script that keeps its own list of failed checks: exit 1 naming how many, or say all passed."""
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("all checks passed")

# SPDX-License-Identifier: MIT
"""What the Python end-to-end tests share: a list of checks that prints each result, `peat` runs
that stop the script on an unexpected exit status, and the one-error-line check for bad input."""
import subprocess
import sys


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

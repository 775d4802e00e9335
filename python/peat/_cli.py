# SPDX-License-Identifier: MIT
"""`python3 -m peat record|playback|analyze ...`; `peat record` and `peat playback -k python:...`
(the C++ CLI) run these with the user's interpreter."""
import argparse
import json
import os
import runpy
import signal
import subprocess
import sys
import traceback


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write("peat: error: %s\n" % message)
        sys.exit(2)


def _fail(message, code=1):
    sys.stderr.write("peat: error: %s\n" % message)
    from . import _events
    _events.send("error", message=message, exit_code=code, code="usage" if code == 2 else "failed")
    return code


def _iterations(text):
    try:
        a, b = text.split(":")
        first, last = int(a or 0), (int(b) if b else None)
    except ValueError:
        raise argparse.ArgumentTypeError("'%s' is not A:B (iterations A to B-1; either may be empty)" % text)
    if first < 0 or (last is not None and last <= first):
        raise argparse.ArgumentTypeError("'%s' is an empty range" % text)
    return first, last


def _record_parser():
    p = _Parser(prog="peat record", description="Record the op calls of a PyTorch training script into a PEAT session.")
    p.add_argument("-o", "--out", required=True, help="session file to write")
    p.add_argument("--ops", default="all", help="all, gemm, conv, or a list: linear,matmul,softmax,...")
    p.add_argument("--every", type=int, default=1, help="record every Nth iteration (default 1)")
    p.add_argument("--iterations", type=_iterations, help="A:B, the iterations to record")
    p.add_argument("--checkpoint-every", type=int, default=0, help="checkpoint (model, optimiser, RNG) every N iterations")
    p.add_argument("--swap", help="OP=KERNEL: runtime fault injection, the candidate in place of every K-th call of OP")
    p.add_argument("--swap-every", type=int, default=1, help="K for --swap")
    p.add_argument("--seed", type=int, default=None, help="seed torch, random and numpy before the script (default: 0 with --swap)")
    p.add_argument("--force", action="store_true", help="replace an existing session")
    p.add_argument("--run-name", default="golden", help=argparse.SUPPRESS)
    p.add_argument("--kind", default="profile", help=argparse.SUPPRESS)
    p.add_argument("--append", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--no-calls", action="store_true", help="record the loss curve only, no calls")
    p.add_argument("--compression", type=int, default=0, choices=range(10), metavar="0-9",
                   help="deflate level of recorded tensors (default 0: none; compression costs the script time)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- [python3] SCRIPT ARGS... or -- [python3] -m MODULE ARGS...")
    return p


def _split_command(command):
    if command and command[0] == "--":
        command = command[1:]
    if command and (os.path.basename(command[0]).startswith("python") and not command[0].endswith(".py")):
        command = command[1:]  # `-- python3 script.py`: this interpreter runs it
    if not command:
        raise ValueError("no script to run: give -- python3 SCRIPT ARGS...")
    if command[0] == "-m":
        if len(command) < 2:
            raise ValueError("-m needs a module name")
        return ("module", command[1], command[2:])
    if not os.path.isfile(command[0]):
        raise ValueError("no script '%s'" % command[0])
    return ("script", command[0], command[1:])


def _seed(seed):
    import random
    import torch
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy
        numpy.random.seed(seed)
    except ImportError:
        pass


def _run_user(kind, target, argv):
    """Runs the script as `python3 SCRIPT ARGS` would; returns its exit code."""
    if kind == "script":
        sys.argv = [target] + argv
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        runpy.run_path(target, run_name="__main__")
    else:
        sys.argv = [target] + argv
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    return 0


def record_main(args):
    p = _record_parser()
    o = p.parse_args(args)
    try:
        kind, target, argv = _split_command(o.command)
    except ValueError as e:
        return _fail(str(e), 2)
    if o.every < 1 or o.swap_every < 1 or o.checkpoint_every < 0:
        return _fail("--every and --swap-every must be at least 1, --checkpoint-every at least 0", 2)
    if o.swap and o.kind != "runtime_fi":
        return _swap_pair(o, args)
    import torch  # noqa: F401  (the user's PyTorch, whichever it is)
    from ._record import Recorder
    swap = None
    if o.swap:
        from ._candidate import CandidateError, load
        op, _, kernel = o.swap.partition("=")
        try:
            swap = (op, load(kernel))
        except CandidateError as e:
            return _fail(str(e))
    if o.seed is not None:
        _seed(o.seed)
    if os.path.exists(o.out) and not (o.force or o.append):
        return _fail("'%s' exists: give --force to replace it" % o.out)
    try:
        rec = Recorder(o.out, ops=o.ops, every=o.every, iterations=o.iterations, checkpoint_every=o.checkpoint_every,
                       force=o.force, append=o.append, run_name=o.run_name, kind=o.kind,
                       kernel=swap[1].spec if swap else "golden", swap=swap, swap_every=o.swap_every,
                       command_line=" ".join(["peat", "record"] + list(args)), store_calls=not o.no_calls, seed=o.seed,
                       compression=o.compression,
                       model=os.path.basename(target))
        if o.kind == "runtime_fi":
            rec.golden_curve = _golden_curve(o.out)
        rec.start()
    except Exception as e:
        return _fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
    code, status = 0, "complete"
    try:
        code = _run_user(kind, target, argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int) and e.code is not None:
            sys.stderr.write("%s\n" % e.code)
        status = "complete" if code == 0 else "failed"
    except KeyboardInterrupt:
        code, status = 130, "cancelled"
        sys.stderr.write("peat: interrupted: the session keeps every iteration recorded before\n")
    except BaseException:
        traceback.print_exc()
        code, status = 1, "failed"
    try:
        rec.stop(status)
    except Exception as e:
        sys.stderr.write("peat: error: the session could not be finished: %s\n" % e)
        return code or 1
    if rec.thread.error is not None:  # the script ran on; the session holds what was written before
        sys.stderr.write("peat: error: recording stopped at a write that failed: %s\n" % rec.thread.error)
        return code or 1
    unclassified = sorted(rec.unclassified.items(), key=lambda kv: -kv[1])
    sys.stderr.write("peat: recorded %d calls in %d iterations of %d to %s (run %s, %s)\n"
                     % (rec.recorded_calls, rec.recorded_iterations, rec.iteration, o.out, o.run_name, status))
    if unclassified:
        sys.stderr.write("peat: ops without a slot op (not recorded): %s\n"
                         % ", ".join("%s %d" % (k.split("::")[1], v) for k, v in unclassified[:12]))
    if rec.errors:
        sys.stderr.write("peat: warning: calls that could not be recorded: %s\n"
                         % "; ".join("%s (%d)" % kv for kv in rec.errors.items()))
    if swap is not None:
        sys.stderr.write("peat: swapped %d calls of %s through %s\n" % (len(rec.swaps), swap[0], swap[1].spec))
    return code


def _golden_curve(session):
    """iteration -> loss of the session's golden run (for the runtime-FI run's loss events)."""
    try:
        from . import _core
        r = _core.Reader(session)
        try:
            t = r.table("golden", "curve")
        finally:
            r.close()
        return {int(i): l for i, l in zip(t["iteration"], t["loss"])}
    except Exception:
        return {}


def _swap_pair(o, args):
    """Runtime FI: the script twice with the same seed, golden then with the candidate swapped in."""
    seed = 0 if o.seed is None else o.seed
    op, _, kernel = o.swap.partition("=")
    if not op or not kernel:
        return _fail("--swap takes OP=KERNEL (e.g. gemm=python:mykernels:bf16_gemm)", 2)
    from ._candidate import CandidateError, load
    try:
        load(kernel)
    except CandidateError as e:
        return _fail(str(e))
    if os.path.exists(o.out) and not o.force:
        return _fail("'%s' exists: give --force to replace it" % o.out)
    rest = [a for a in o.command]
    common = ["--ops", o.ops, "--every", str(o.every), "--seed", str(seed)]
    if o.iterations:
        common += ["--iterations", "%d:%s" % (o.iterations[0], "" if o.iterations[1] is None else o.iterations[1])]
    me = [sys.executable, "-m", "peat", "record", "-o", o.out]
    golden = me + common + (["--force"] if o.force else []) + ["--checkpoint-every", str(o.checkpoint_every)] + rest
    name = "runtime-fi-" + (kernel.split(":")[-1] if kernel.startswith("python:") else kernel)
    fi = me + common + ["--append", "--no-calls", "--run-name", name, "--kind", "runtime_fi", "--swap", o.swap,
                        "--swap-every", str(o.swap_every)] + rest
    for cmd in (golden, fi):
        child = subprocess.Popen(cmd)
        try:
            code = child.wait()
        except KeyboardInterrupt:  # Ctrl-C (or the workbench's Cancel): the child ends its run readable
            try:
                child.send_signal(signal.SIGINT)
                child.wait(timeout=60)
            except (subprocess.TimeoutExpired, OSError):
                child.kill()
            return 130
        if code != 0:
            return code
    return 0


def playback_main(args):
    p = _Parser(prog="peat playback", description="Replay recorded calls through a Python candidate or the recorded op.")
    p.add_argument("-s", "--session", required=True)
    p.add_argument("-k", "--kernel", required=True, help="golden, or python:MODULE:FUNCTION")
    p.add_argument("--op", help="replay only calls of this op (or group: gemm, conv)")
    p.add_argument("--device", help="cpu, cuda, cuda:0 (default: the device it was recorded on)")
    p.add_argument("--run", help="the recorded run (default: the first recording)")
    p.add_argument("--name", help="name of the playback run to add")
    p.add_argument("--max-calls", type=int, default=0)
    p.add_argument("--call", help="one call path, e.g. iterations/000000/calls/000003")
    p.add_argument("--analyze", action="store_true", help="run the analyzer and detector over the replay too")
    p.add_argument("--json", action="store_true")
    o = p.parse_args(args)
    if not os.path.exists(o.session):
        return _fail("cannot open '%s': No such file or directory" % o.session)
    from . import _core
    from ._candidate import CandidateError
    from ._playback import PlaybackError, playback
    try:
        r = playback(o.session, o.kernel, op=o.op, device=o.device, run=o.run, name=o.name, max_calls=o.max_calls,
                     call=o.call, analyze=o.analyze)
    except (CandidateError, PlaybackError, _core.SessionError) as e:
        return _fail(str(e))
    if o.json:
        out = {k: v for k, v in r.items() if k != "rows"}
        out["calls"] = r["rows"]
        print(json.dumps(out, default=float))
        return 0
    print("replayed %d calls through %s on %s in %.3f s (%.1f calls/s), skipped %d, failed %d, bit-exact %d"
          % (r["replayed"], r["kernel"], r["device"], r["replay_seconds"], r["replayed"] / max(r["replay_seconds"], 1e-9),
             r["skipped"], r["failed"], r["bit_exact"]))
    if r["worst"]:
        w = r["worst"]
        print("  worst call %s: max abs error %.6g, max rel error %.6g, mismatches %d of %d"
              % (w["call"], w["max_abs"], w["max_rel"], w["mismatched"], w["elements"]))
    failures = [x for x in r["rows"] if x["outcome"] != "ok"]
    for f in failures[:5]:
        print("  it %d call %d %s %s %s: %s" % (f["iteration"], f["call_index"], f["layer"], f["op"], f["variant"], f["outcome"]))
    for e in r["errors"][:3]:
        print("  %s (%s) raised %s" % (e["call"], e["op"], e["message"][:200]))
    if r["nondeterministic"]:
        print("  %d calls differ from run to run on this device (two golden runs differ): their kernels are not "
              "deterministic, e.g. %s" % (len(r["nondeterministic"]), r["nondeterministic"][0]))
    print("  stored as run %s in %s" % (r["run"], r["session"]))
    if "analysis" in r:
        from collections import Counter
        verdicts = Counter(c["verdict"]["model"] + (" (%s)" % c["verdict"]["parameters"]["format"]
                                                    if "format" in c["verdict"]["parameters"] else "")
                           for c in r["analysis"]["calls"])
        print("  verdicts: " + ", ".join("%s %d" % kv for kv in verdicts.most_common()))
        print("  analysis run %s" % r["analysis"]["run"])
    return 0


def analyze_main(args):
    p = _Parser(prog="python3 -m peat analyze")
    p.add_argument("-s", "--session", required=True)
    p.add_argument("--run", required=True)
    p.add_argument("--json", action="store_true")
    o = p.parse_args(args)
    from . import _core
    try:
        r = _core.analyze_session(o.session, o.run, "")
    except Exception as e:
        return _fail(str(e).splitlines()[0])
    if o.json:
        print(json.dumps(r, default=float))
    else:
        for c in r["calls"]:
            v = c["verdict"]
            print("%s %s %s: %s %.2f %s" % (c["call"], c["layer"], c["op"], v["model"], v["confidence"], v["explanation"]))
    return 0


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python3 -m peat {record,playback,analyze} ...  (python3 -m peat COMMAND --help)")
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "record":
        return record_main(rest)
    if cmd == "playback":
        return playback_main(rest)
    if cmd == "analyze":
        return analyze_main(rest)
    return _fail("unknown command '%s' (record, playback, analyze)" % cmd, 2)

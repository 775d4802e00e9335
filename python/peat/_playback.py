# SPDX-License-Identifier: MIT
"""Playback fault injection in Python: recorded calls replayed through a candidate (a Python
callable, or the recorded ATen op itself for `golden`) on the user's device, compared with the
recorded output, and stored as a playback run that `peat analyze` and the workbench read."""
import json
import math
import time

import torch

from . import _core
from ._candidate import CandidateError, check_arity, load
from ._tensors import as_float32, from_stored, storable, to_numpy

VARIANTS = ["forward", "grad_input", "grad_weight", "grad_bias", "update"]


class PlaybackError(Exception):
    """Bad input to a playback: one line for the user."""


def _resolve(func_name):
    """aten::addmm.default -> torch.ops.aten.addmm.default (None when this PyTorch has no such op)"""
    try:
        ns_name, overload = func_name.rsplit(".", 1)
        ns, name = ns_name.split("::")
        packet = getattr(getattr(torch.ops, ns), name)
        return getattr(packet, overload)
    except (AttributeError, RuntimeError, ValueError):
        return None


class _Loaded:
    """One recorded call, decoded: the ATen op and its arguments on the replay device."""

    def __init__(self, reader, run, call, device):
        self.call = call
        spec = json.loads(call["labels"]["replay"])
        self.spec = spec
        self.func = _resolve(spec["op"])
        if self.func is None:
            raise PlaybackError("the recorded op %s is not in this PyTorch (%s)" % (spec["op"], torch.__version__))
        self.reader, self.run, self.device = reader, run, device
        self.cache = {}
        self.args = self._decode(spec["args"])
        self.kwargs = self._decode(spec["kwargs"])
        self.index = spec.get("index")

    def _tensor(self, s):
        shape, strides, dt = s["sh"], s["st"], getattr(torch, s["dt"])
        if s.get("E"):
            return torch.empty_strided(shape, strides, dtype=dt, device=self.device)
        name = s["T"]
        if name not in self.cache:
            dtype, stored_shape, data = self.reader.read_tensor(self.run, self.call["path"], name)
            self.cache[name] = from_stored(dtype, stored_shape, data, s["dt"], self.device)
        t = self.cache[name]
        if s.get("t"):
            t = t.t()
        offset = int(s.get("so", 0))
        if (list(t.stride()) == list(strides) and not offset) or t.numel() <= 1:
            return t
        # the recorded layout (a transposed view, channels-last, a view at an offset into a larger
        # tensor): the same strides and the same offset from an allocation, so the kernel takes the
        # same path (vectorised loads depend on alignment) as it did in training
        if _dense(shape, strides):
            span = 1 + sum((n - 1) * st for n, st in zip(shape, strides) if n > 0)
            base = torch.empty(offset + span, dtype=t.dtype, device=self.device)
            out = base.as_strided(shape, strides, offset)
            out.copy_(t)
            return out
        return t.contiguous()

    def _decode(self, x):
        if isinstance(x, list):
            return [self._decode(v) for v in x]
        if isinstance(x, dict):
            if "T" in x or "E" in x:
                return self._tensor(x)
            if "dtype" in x and len(x) == 1:
                return getattr(torch, x["dtype"])
            if "device" in x and len(x) == 1:
                return torch.device(self.device)
            if "enum" in x and len(x) == 1:
                return getattr(torch, x["enum"])
            if "float" in x and len(x) == 1:
                return float(x["float"])
            if "D" in x and len(x) == 1:
                return {k: self._decode(v) for k, v in x["D"].items()}
            return {k: self._decode(v) for k, v in x.items()}
        return x

    def fresh_args(self):
        """Arguments for one run: in-place ops get copies, so the recorded inputs stay as they were."""
        if self.func._schema.is_mutable if hasattr(self.func._schema, "is_mutable") else False:
            clone = lambda v: v.clone() if isinstance(v, torch.Tensor) else ([clone(u) for u in v] if isinstance(v, list) else v)
            return clone(self.args), dict(self.kwargs)
        return self.args, self.kwargs

    def golden(self):
        args, kwargs = self.fresh_args()
        if self.spec.get("mode") == "dropout":  # the recorded mask, not a new draw: x * mask * 1/(1-p)
            x, p = args[0], float(args[1])
            mask = self.aux("aux_mask")
            out = x.mul(mask).mul_(1.0 / (1.0 - p)) if p < 1 else torch.zeros_like(x)
            return out
        out = self.func(*args, **kwargs)
        return self._pick(out, args)

    def aux(self, name):
        dtype, shape, data = self.reader.read_tensor(self.run, self.call["path"], name)
        return from_stored(dtype, shape, data, None, self.device).to(torch.bool)

    def _pick(self, out, args):
        if self.func._schema.name.startswith("aten::_foreach") and out is None:
            out = args[0]
        if isinstance(out, (list, tuple)) and self.index is None and len(out) == 1:
            return out[0]
        if self.index is not None and isinstance(out, (list, tuple)):
            return out[self.index]
        if out is None and args and isinstance(args[0], torch.Tensor):  # an in-place op returns its self
            return args[0]
        return out

    def recorded(self):
        for name, dtype, shape in self.call["tensors"]:
            if name == "output":
                dt, sh, data = self.reader.read_tensor(self.run, self.call["path"], "output")
                return from_stored(dt, sh, data, None, "cpu")
        raise PlaybackError("recorded call %s has no output" % self.call["path"])


def _known_ops(calls):
    ops = {json.loads(c["labels"]["replay"])["op"] for c in calls if "replay" in c["labels"]}
    return [o for o in ops if _resolve(o) is not None]


def _dense(shape, strides):
    dims = sorted((st, sz) for st, sz in zip(strides, shape) if sz != 1)
    expect = 1
    for st, sz in dims:
        if st != expect:
            return False
        expect *= sz
    return True


def _same_bits(a, b):
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
        return False
    a, b = a.detach().to("cpu").contiguous(), b.detach().to("cpu").contiguous()
    if a.is_floating_point():
        return bool(torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)))
    return bool(torch.equal(a, b))


def run_candidate(cand, func, args, kwargs, ref, index, errors=None, call=None):
    """The candidate's output for one call, checked against the reference output `ref` (output
    `index` of a fused op with several), and its outcome: "ok", or how it failed (it raised,
    returned another shape or dtype, or nothing). What it raised goes to `errors`."""
    try:
        out = cand(func, args, kwargs)
    except Exception as e:
        if errors is not None:
            errors.append((call, "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")))
        return None, "raised:%s" % type(e).__name__
    if index is not None and isinstance(out, (list, tuple)):
        out = out[index]
    if isinstance(out, (list, tuple)) and len(out) == 1:
        out = out[0]
    if not isinstance(out, torch.Tensor):
        return None, "returned:%s" % type(out).__name__
    if tuple(out.shape) != tuple(ref.shape):
        return None, "wrong_shape"
    if out.dtype != ref.dtype:
        return None, "wrong_dtype:%s" % str(out.dtype).replace("torch.", "")
    if out.device != ref.device:
        out = out.to(ref.device)
    return out, "ok"


def _source_run(summary, run):
    runs = summary["runs"]
    for r in runs:
        if (run and r["name"] == run) or (not run and r["kind"] == "profile" and any(it["calls"] for it in r["iterations"])):
            if r["kind"] != "profile":
                raise PlaybackError("run '%s' is a %s run, not a recording" % (r["name"], r["kind"]))
            return r
    raise PlaybackError("session has no run '%s'" % run if run else "session has no recorded calls to replay")


def playback(session, kernel, op=None, device=None, run=None, name=None, max_calls=0, call=None,
             analyze=False, progress=None):
    """Replays the recorded calls of `session` (op `op`, or every op the kernel takes) through
    `kernel` ("golden" or "python:MODULE:FUNCTION") on `device`, and stores a playback run with the
    candidate's outputs beside the recording. Returns a dict of what it did (and the verdicts with
    analyze=True)."""
    start = time.perf_counter()
    summary = _core.summary(session)
    source = _source_run(summary, run)
    if source["attributes"].get("recorder") != "peat-python":
        raise PlaybackError("run '%s' was recorded by `peat profile`, not the Python package: replay it with "
                            "`peat playback -k KERNEL` (C++ kernels) instead" % source["name"])
    golden = kernel == "golden"
    cand = None if golden else load(kernel)
    device = device or source["attributes"].get("device", "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise PlaybackError("device '%s' is not available here (torch.cuda.is_available() is False)" % device)
    calls = [c for it in source["iterations"] if it["complete"] for c in it["calls"]]
    if op:
        from ._classify import selected
        calls = [c for c in calls if selected(c["op"], {op})]
        if not calls:
            raise PlaybackError("run '%s' has no call of op '%s' (peat info --calls lists them)" % (source["name"], op))
    if call:
        calls = [c for c in calls if c["path"] == call]
        if not calls:
            raise PlaybackError("run '%s' has no call '%s'" % (source["name"], call))
    skipped = 0
    if cand is not None:
        take = [c for c in calls if cand.takes(c["op"], int(c["params"].get("variant", 0)))]
        if calls and not take:
            raise PlaybackError("kernel '%s' takes none of the chosen calls (it runs %s; they are %s)"
                                % (kernel, ", ".join(sorted(cand.ops or [])), ", ".join(sorted({c["op"] for c in calls}))))
        skipped += len(calls) - len(take)
        calls = take
    if max_calls and len(calls) > max_calls:
        skipped += len(calls) - max_calls
        calls = calls[:max_calls]
    missing = sorted({json.loads(c["labels"]["replay"])["op"] for c in calls
                      if "replay" in c["labels"]} - set(_known_ops(calls)))
    if missing:
        raise PlaybackError("%d recorded op%s not in this PyTorch (%s), e.g. %s: the session was recorded with PyTorch %s; "
                            "replay it with that version" % (len(missing), "s are" if len(missing) > 1 else " is",
                                                             torch.__version__, missing[0],
                                                             source["attributes"].get("pytorch_version", "?")))
    reader = _core.Reader(session)
    if cand is not None and calls:  # a function that cannot take the op's arguments: said before anything runs
        first = _Loaded(reader, source["name"], calls[0], device)
        a, k = first.fresh_args()
        check_arity(cand, first.func, a, k)
    threads = source["attributes"].get("threads")
    if threads and threads.isdigit():
        torch.set_num_threads(max(1, min(int(threads), 1024)))
    rows, outputs = [], []
    worst = None
    errors, nondeterministic = [], []  # (call, message) of calls that raised; golden calls that differ run to run
    replayed = failed = 0
    t_replay = 0.0
    for i, c in enumerate(calls):
        loaded = _Loaded(reader, source["name"], c, device)
        recorded = loaded.recorded()
        t0 = time.perf_counter()
        if golden:
            try:
                out, outcome = loaded.golden(), "ok"
                if not _same_bits(out, recorded):  # a kernel that is not deterministic here gives another result each run
                    again = loaded.golden()
                    if not _same_bits(out, again):
                        nondeterministic.append(c)
            except Exception as e:
                out, outcome = None, "raised:%s" % type(e).__name__
                errors.append((c, "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")))
        else:
            args, kwargs = loaded.fresh_args()
            # the candidate is compared with the recorded output; fused ops with several outputs
            # give the candidate's one
            out, outcome = run_candidate(cand, loaded.func, args, kwargs, recorded, loaded.index, errors, c)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t_replay += time.perf_counter() - t0
        replayed += 1
        row = {"layer": c["layer"], "op": c["op"], "phase": c["phase"],
               "variant": VARIANTS[min(int(c["params"].get("variant", 0)), 4)], "outcome": outcome,
               "iteration": c["iteration"], "call_index": c["call_index"]}
        if outcome == "ok" and (tuple(out.shape) != tuple(recorded.shape)):
            outcome = row["outcome"] = "wrong_shape"
        if outcome != "ok":
            failed += 1
            row.update({n: float("nan") for n in _core.error_summary_columns()})
        else:
            e = _core.summarize(as_float32(recorded), as_float32(out))
            row.update(e)
            if worst is None or e["max_abs"] > worst["max_abs"]:
                worst = dict(e, call=c["path"])
            outputs.append((c, out.detach().to("cpu")))
        rows.append(row)
        if progress:
            progress(i + 1, len(calls), c)
    reader.close()
    kname = "golden" if golden else cand.name
    run_name = name or "playback-%s" % kname
    w = _core.Writer(session, {}, "append")
    try:
        n = 2
        base = run_name
        while w.has_run(run_name):
            run_name = "%s-%d" % (base, n)
            n += 1
        w.begin_run(run_name, "playback", kernel, "replay of run %s through %s (Python, %s)" % (source["name"], kernel, device))
        w.set_run_attribute("source_run", source["name"])
        w.set_run_attribute("model", source["attributes"].get("model", ""))
        w.set_run_attribute("device", device)
        w.set_run_attribute("pytorch_version", torch.__version__)
        w.set_run_attribute("replayed", str(replayed))
        w.set_run_attribute("skipped", str(skipped))
        if cand is not None and cand.declared:  # judged with what the candidate declared, as a plugin's
            w.set_run_attribute("declared_formats", cand.declared)
        cols = ["layer", "op", "phase", "variant", "outcome"]
        numbers = ["iteration", "call_index"] + list(_core.error_summary_columns())
        w.write_table("call_errors", [(k, [r[k] for r in rows], True) for k in cols] +
                      [(k, [float(r[k]) for r in rows], False) for k in numbers])
        if outputs:
            w.set_call_compression(4)
            open_it = None
            for c, out in outputs:
                if c["iteration"] != open_it:
                    if open_it is not None:
                        w.end_iteration()
                    w.begin_iteration(c["iteration"])
                    open_it = c["iteration"]
                a, dt = to_numpy(out)
                w.record_call(c["layer"], c["op"], c["phase"], c["iteration"], c["call_index"], [("output", a, dt)],
                              c["params"], {})
            w.end_iteration()
            w.set_run_attribute("stored_outputs", "1")
        w.end_run("complete")
    finally:
        w.close()
    exact = sum(1 for r in rows if r["outcome"] == "ok" and r["mismatched"] == 0)
    result = {"session": session, "run": run_name, "source_run": source["name"], "kernel": kernel, "device": device,
              "replayed": replayed, "skipped": skipped, "failed": failed, "bit_exact": exact,
              "seconds": time.perf_counter() - start, "replay_seconds": t_replay, "rows": rows, "worst": worst,
              "errors": [{"call": c["path"], "op": c["op"], "message": m} for c, m in errors[:20]],
              "nondeterministic": [c["path"] for c in nondeterministic]}
    if analyze and outputs:
        result["analysis"] = _core.analyze_session(session, run_name)
    return result

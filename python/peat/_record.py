# SPDX-License-Identifier: MIT
"""Recording a user's own PyTorch program: a TorchDispatchMode sees every ATen call (forward,
backward and optimiser), names it as the workbench names calls (module path, op, variant, iteration,
index), and a writer thread stores the selected ones in a PEAT session through peat._core.

An iteration is one optimizer.step() (hooked) or one peat.step(). With a swap, the mode also runs a
candidate in place of every K-th call of an op (runtime fault injection) and records its errors."""
import collections
import os
import platform
import queue
import sys
import threading
import time
import types

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _classify
from . import _core
from . import _events
from ._tensors import as_float32, storable, to_numpy

_active = None  # the Recorder of this process, if any


def _index(i):
    return "%06d" % i


class _Writer(threading.Thread):
    """Writes recorded iterations in order, off the training thread (HDF5 calls release the GIL)."""

    def __init__(self, writer):
        super().__init__(name="peat-writer", daemon=True)
        self.writer = writer
        self.jobs = queue.Queue(maxsize=4)  # bounded: a slow disk slows training, not memory
        self.error = None

    def run(self):
        while True:
            job = self.jobs.get()
            if job is None:
                return
            if self.error is None:
                try:
                    job()
                except BaseException as e:  # kept and reported; training goes on
                    self.error = e

    def submit(self, job):
        if self.error is None:  # after a failure nothing more is written; stop() reports it
            self.jobs.put(job)

    def finish(self):
        self.jobs.put(None)
        self.join()


class _Mode(TorchDispatchMode):
    def __init__(self, rec):
        super().__init__()
        self.rec = rec

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.rec._dispatch(func, args, kwargs or {})


class Recorder:
    """Records the calls of the program that runs while it is active (peat.record's context)."""

    def __init__(self, path, ops="all", every=1, iterations=None, checkpoint_every=0, force=False,
                 append=False, run_name="golden", kind="profile", kernel="golden", swap=None, swap_every=1,
                 compression=0, command_line=None, store_calls=True, seed=None, model=None):
        self.path = path
        self.wanted = None if ops in (None, "all") else set(o.strip() for o in (ops.split(",") if isinstance(ops, str) else ops))
        if self.wanted is not None:
            unknown = sorted(w for w in self.wanted if w not in _classify.known_names())
            if unknown:
                raise ValueError("unknown op '%s' in --ops (ops: %s)" % (unknown[0], ", ".join(_classify.known_names())))
        if every < 1:
            raise ValueError("--every must be at least 1")
        self.every = every
        self.first, self.last = iterations if iterations else (0, None)
        self.checkpoint_every = checkpoint_every
        self.store_calls = store_calls
        self.swap, self.swap_every = swap, max(1, swap_every)  # swap: (op, Candidate)
        self.run_name, self.kind, self.kernel = run_name, kind, kernel
        self.seed = seed
        self.command_line = command_line or " ".join(sys.argv)
        self.model = model or (os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python")
        mode = "append" if append and os.path.exists(path) else ("overwrite" if force else "create")
        device = "cuda" if torch.cuda.is_available() else "cpu"
        self.writer = _core.Writer(path, {
            "model": self.model,
            "backend": device, "device": torch.cuda.get_device_name(0) if device == "cuda" else platform.processor() or "cpu",
            "libtorch_version": "PyTorch " + torch.__version__, "command_line": self.command_line,
            "seed": str(seed or 0)}, mode)
        if not 0 <= compression <= 9:
            raise ValueError("compression level %d is not in 0-9" % compression)
        self.compression = compression
        self.iteration = 0
        self.call_index = 0
        self.recorded_iterations = 0
        self.recorded_calls = 0
        self.counts = collections.Counter()        # slot op -> calls seen (recorded iterations)
        self.unclassified = collections.Counter()  # ATen op -> calls seen with no slot op
        self.plumbing = collections.Counter()
        self.swap_seen = 0
        self.swaps = []        # rows of call_errors for swapped calls
        self.losses = []       # (iteration, loss tensor)
        self.pending_loss = None
        self.module_stack = []
        self.names = {}        # id(module) -> qualified name
        self.roots = []
        self.checkpointed_start = False
        self.optimizers = []
        self.shared = {}       # tensor key -> dataset path, within an iteration
        self.generation = {}   # storage -> writes seen to it, within an iteration
        self.pending = []      # this iteration's calls to write
        self.in_backward = 0
        self.in_optimizer = 0
        self.mode = _Mode(self)
        self.mode_on = False
        self.hooks = []
        self.patches = []
        self.errors = collections.Counter()  # record failures by reason (the program goes on)
        self.status = "running"
        self.golden_curve = None  # runtime FI: iteration -> the golden run's loss, for the loss events
        self.skipped_steps = 0    # GradScaler steps that skipped the optimiser (inf or NaN gradients)
        self.scaled = {}          # id of a GradScaler-scaled loss -> the loss before scaling
        self.thread = None
        self._lock = threading.RLock()

    # ---- selection ------------------------------------------------------------------------------
    def _records(self, iteration):
        if iteration < self.first or (self.last is not None and iteration >= self.last):
            return False
        return (iteration - self.first) % self.every == 0

    def _needs_mode(self, iteration):
        return self.swap is not None or self._records(iteration)

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self):
        global _active
        if _active is not None:
            raise RuntimeError("peat is already recording in this process")
        _active = self
        self.writer.begin_run(self.run_name, self.kind, self.kernel,
                              "calls of %s recorded by the peat Python package" % self.command_line)
        # uncompressed by default: deflate runs at about 50 MB/s here, far slower than the disk,
        # and its thread takes a core from the training it records
        self.writer.set_call_compression(self.compression)
        attrs = {"recorder": "peat-python", "pytorch_version": torch.__version__,
                 "python_version": platform.python_version(), "script": sys.argv[0] if sys.argv else "",
                 "command_line": self.command_line, "record_every": str(self.every),
                 "record_ops": "all" if self.wanted is None else ",".join(sorted(self.wanted)),
                 "iterations_range": "%d:%s" % (self.first, "" if self.last is None else self.last),
                 "threads": str(torch.get_num_threads()), "seed": str(self.seed if self.seed is not None else ""),
                 "device": "cuda:0" if torch.cuda.is_available() else "cpu", "model": self.model}
        if self.swap is not None:
            attrs.update(swap_op=self.swap[0], swap_kernel=self.swap[1].spec, every=str(self.swap_every))
        for k, v in attrs.items():
            self.writer.set_run_attribute(k, v)
        self.thread = _Writer(self.writer)
        self.thread.start()
        self._install()
        if self._needs_mode(0):
            self._mode_enter()
        return self

    def stop(self, status="complete"):
        global _active
        if self.mode_on:
            self._mode_exit()
        self._uninstall()
        if self.pending:
            self._flush_iteration(complete=status == "complete")
        self.status = status
        counts, unclassified = dict(self.counts), dict(self.unclassified)
        swaps, losses = list(self.swaps), list(self.losses)
        if self.pending_loss is not None:
            losses.append((self.iteration, self.pending_loss))

        if _events.ENABLED:
            last_it, last_loss = losses[-1] if losses else (self.iteration, None)
            self._progress(last_loss, last_it, done=self.iteration)

        def close():
            w = self.writer
            if self.skipped_steps:
                w.set_run_attribute("skipped_steps", str(self.skipped_steps))
            w.set_run_attribute("op_counts", ", ".join("%s=%d" % kv for kv in sorted(counts.items())))
            w.set_run_attribute("unclassified", ", ".join("%s=%d" % kv for kv in sorted(unclassified.items(), key=lambda kv: -kv[1])))
            w.set_run_attribute("iterations_run", str(self.iteration))
            if self.errors:
                w.set_run_attribute("record_errors", "; ".join("%s (%d)" % kv for kv in self.errors.items()))
            self._write_curve(losses)
            if self.swap is not None:
                self._write_swaps(swaps)
            w.end_run(status)
        try:
            self.thread.submit(close)
            self.thread.finish()
        finally:
            self.writer.close()
            _active = None
        _events.send("stored", session=self.path, kind="run", name=self.run_name)

    def _write_curve(self, losses):
        if not losses:
            return
        its = [float(i) for i, _ in losses]
        values = [float(l.detach().float().cpu()) if isinstance(l, torch.Tensor) else float(l) for _, l in losses]
        nan = [float("nan")] * len(its)
        self.writer.write_table("curve", [("iteration", its, False), ("loss", values, False), ("accuracy", nan, False),
                                          ("test_loss", nan, False), ("test_accuracy", nan, False)])

    def _write_swaps(self, rows):
        cols = ["layer", "op", "phase", "variant", "outcome"]
        numbers = ["iteration", "call_index"] + list(_core.error_summary_columns())
        table = [(c, [r[c] for r in rows], True) for c in cols] + [(n, [float(r[n]) for r in rows], False) for n in numbers]
        self.writer.write_table("call_errors", table)

    # ---- hooks ----------------------------------------------------------------------------------
    def _install(self):
        mm = torch.nn.modules.module
        self.hooks.append(mm.register_module_forward_pre_hook(self._pre_hook))
        self.hooks.append(mm.register_module_forward_hook(self._post_hook))
        import torch.optim.optimizer as om
        if hasattr(om, "register_optimizer_step_post_hook"):
            self.hooks.append(om.register_optimizer_step_pre_hook(self._opt_pre))
            self.hooks.append(om.register_optimizer_step_post_hook(self._opt_post))
        else:  # PyTorch 1.13: wrap each optimizer's step as it is made
            rec = self
            orig_init = torch.optim.Optimizer.__init__

            def init(opt, *a, **k):
                orig_init(opt, *a, **k)
                step = opt.step

                def wrapped(self, *sa, **sk):
                    rec._opt_pre(self, sa, sk)
                    try:
                        return step(*sa, **sk)
                    finally:
                        rec._opt_post(self, sa, sk)
                # a bound method, as lr_scheduler's step counter expects
                opt.step = types.MethodType(wrapped, opt)
            torch.optim.Optimizer.__init__ = init
            self.patches.append((torch.optim.Optimizer, "__init__", orig_init))
        self._patch_grad_scaler()
        orig_backward = torch.autograd.backward

        def backward(tensors, *a, **k):
            self._note_loss(tensors)
            self.in_backward += 1
            try:
                return orig_backward(tensors, *a, **k)
            finally:
                self.in_backward -= 1
        torch.autograd.backward = backward
        self.patches.append((torch.autograd, "backward", orig_backward))
        orig_grad = torch.autograd.grad

        def grad(*a, **k):
            self.in_backward += 1
            try:
                return orig_grad(*a, **k)
            finally:
                self.in_backward -= 1
        torch.autograd.grad = grad
        self.patches.append((torch.autograd, "grad", orig_grad))

    def _uninstall(self):
        for h in self.hooks:
            h.remove()
        self.hooks = []
        for obj, name, value in reversed(self.patches):
            setattr(obj, name, value)
        self.patches = []

    def _note_loss(self, tensors):
        t = tensors[0] if isinstance(tensors, (list, tuple)) and tensors else tensors
        if isinstance(t, torch.Tensor) and t.numel() == 1:
            unscaled = self.scaled.pop(id(t), None)  # scaler.scale(loss).backward(): the loss itself
            self.pending_loss = unscaled if unscaled is not None else t.detach().clone()
        self.scaled.clear()

    def _patch_grad_scaler(self):
        """GradScaler: the loss curve takes the loss before scaling, and a step the scaler skips
        (inf or NaN gradients: the optimiser does not run) still ends the iteration."""
        classes = []
        for mod, name in (("torch.amp.grad_scaler", "GradScaler"), ("torch.cuda.amp.grad_scaler", "GradScaler"),
                          ("torch.cuda.amp", "GradScaler")):
            try:
                cls = getattr(__import__(mod, fromlist=[name]), name)
            except (ImportError, AttributeError):
                continue
            if "step" in cls.__dict__ and cls not in classes:
                classes.append(cls)
        rec = self
        for cls in classes:
            orig_scale, orig_step = cls.__dict__.get("scale"), cls.__dict__["step"]
            if orig_scale is not None:
                def scale(scaler, outputs, _orig=orig_scale):
                    r = _orig(scaler, outputs)
                    if isinstance(outputs, torch.Tensor) and outputs.numel() == 1 and isinstance(r, torch.Tensor):
                        rec.scaled[id(r)] = outputs.detach().clone()
                    return r
                cls.scale = scale
                self.patches.append((cls, "scale", orig_scale))

            def step(scaler, optimizer, *a, _orig=orig_step, **k):
                before = rec.iteration
                r = _orig(scaler, optimizer, *a, **k)
                first = rec.optimizers[0] if rec.optimizers else optimizer
                if rec.iteration == before and optimizer is first:  # skipped: no optimizer.step() ran
                    if not rec.optimizers:
                        rec.optimizers.append(optimizer)
                    rec.skipped_steps += 1
                    rec.end_iteration()
                return r
            cls.step = step
            self.patches.append((cls, "step", orig_step))

    def _pre_hook(self, module, inputs):
        if id(module) not in self.names:
            if not self.module_stack:  # a root module: name it and its children
                self.roots.append(module)
                for name, m in module.named_modules():
                    self.names.setdefault(id(m), name)
                if self.checkpoint_every and self.iteration == 0 and not self.checkpointed_start:
                    self.checkpointed_start = True
                    self._checkpoint(0)
            else:
                parent = self.module_stack[-1]
                self.names[id(module)] = (parent + "." if parent else "") + type(module).__name__.lower()
        if self.mode_on and torch.is_grad_enabled() and self.module_stack:
            # what made this module's inputs since the last module ended (a functional op between
            # two layers: F.relu(self.fc1(x)) before fc2) belongs to the enclosing module, not to
            # the module whose post-hook would otherwise reach it first
            _name_graph(inputs, self.module_stack[-1] or "model")
        self.module_stack.append(self.names[id(module)])

    def _post_hook(self, module, inputs, output):
        if self.module_stack:
            name = self.module_stack.pop()
            if self.mode_on and torch.is_grad_enabled():
                _name_graph(output, name or "model")



    def _opt_pre(self, opt, args, kwargs):
        if not any(o is opt for o in self.optimizers):
            self.optimizers.append(opt)
        self.in_optimizer += 1

    def _opt_post(self, opt, args, kwargs):
        self.in_optimizer = max(0, self.in_optimizer - 1)
        if opt is self.optimizers[0]:  # one iteration per step of the first optimizer
            self.end_iteration()

    # ---- iterations -----------------------------------------------------------------------------
    def end_iteration(self):
        with self._lock:
            loss = self.pending_loss
            if self.pending_loss is not None:
                self.losses.append((self.iteration, self.pending_loss))
                self.pending_loss = None
            ended = self.iteration
            if self.pending:
                self._flush_iteration(complete=True)
            self.iteration += 1
            if _events.ENABLED and _events.due():  # after the flush: N done means N iterations written
                self._progress(loss, ended, done=self.iteration)
            self.call_index = 0
            self.shared = {}
            self.generation = {}
            if self.checkpoint_every and self.iteration % self.checkpoint_every == 0:
                self._checkpoint(self.iteration)
            want = self._needs_mode(self.iteration)
            if want and not self.mode_on:
                self._mode_enter()
            elif not want and self.mode_on:
                self._mode_exit()
            if self.losses and len(self.losses) % 50 == 0:
                losses = list(self.losses)
                self.thread.submit(lambda: self._write_curve(losses))

    def _progress(self, loss, iteration, done):
        """progress and loss events (docs/events.md): `done` iterations ended of the range asked for
        (total 0 when the script alone knows how many it runs); `loss` is iteration `iteration`'s."""
        total = self.last if self.last is not None else 0
        _events.send("progress", done=done, total=total, stage="record",
                     status="iteration %d, %d calls recorded" % (done, self.recorded_calls))
        if loss is not None:
            value = float(loss.detach().float().cpu()) if isinstance(loss, torch.Tensor) else float(loss)
            fields = {"iteration": iteration, "loss": value, "saved": self.recorded_iterations}
            if self.golden_curve is not None:  # runtime FI: the golden run's loss beside the candidate's
                fields["loss"] = self.golden_curve.get(iteration, float("nan"))
                fields["candidate_loss"] = value
            _events.send("loss", **fields)

    def _flush_iteration(self, complete):
        calls, iteration = self.pending, self.iteration
        self.pending = []
        self.recorded_iterations += 1
        w = self.writer

        def job():
            w.begin_iteration(iteration)
            for layer, op, phase, index, tensors, params, labels in calls:
                arrays = []
                for name, t in tensors:
                    if isinstance(t, str):
                        arrays.append((name, t))
                    else:
                        a, dt = to_numpy(t)
                        arrays.append((name, a, dt))
                w.record_call(layer, op, phase, iteration, index, arrays, params, labels)
            if complete:
                w.end_iteration()
        self.thread.submit(job)

    def _checkpoint(self, iteration):
        params, opt_state = [], []
        seen = set()
        for root in self.roots:
            for name, p in list(root.named_parameters()) + list(root.named_buffers()):
                if id(p) in seen or not storable(p):
                    continue
                seen.add(id(p))
                params.append((name, p.detach().clone()))
        pname = {}
        for root in self.roots:
            for name, p in root.named_parameters():
                pname.setdefault(id(p), name)
        for opt in self.optimizers:
            for p, state in opt.state.items():
                for key, value in state.items():
                    if isinstance(value, torch.Tensor) and storable(value):
                        opt_state.append(("%s.%s" % (pname.get(id(p), "param%d" % id(p)), key), value.detach().clone()))
        opt_state.append(("rng.torch_cpu", torch.get_rng_state()))
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            for i, s in enumerate(torch.cuda.get_rng_state_all()):
                opt_state.append(("rng.cuda%d" % i, s))
        w = self.writer

        def job():
            conv = lambda items: [(n.replace("/", "."), *to_numpy(t)) for n, t in items]
            w.write_checkpoint(iteration, conv(params), conv(opt_state))
        self.thread.submit(job)

    def _mode_enter(self):
        self.mode.__enter__()
        self.mode_on = True

    def _mode_exit(self):
        self.mode.__exit__(None, None, None)
        self.mode_on = False

    # ---- the calls ------------------------------------------------------------------------------
    def _phase(self):
        if self.in_optimizer:
            return "optimizer"
        if self.in_backward:
            return "backward"
        gt = getattr(torch._C, "_current_graph_task_id", None)
        if gt is not None and gt() != -1:
            return "backward"
        return "forward"

    def _layer(self, phase):
        if phase == "optimizer":
            return "optimizer"
        if phase == "backward":
            node = getattr(torch._C, "_current_autograd_node", None)
            n = node() if node is not None else None
            layer = _node_layer(n) if n is not None else None
            if layer is not None:
                return layer
            if n is not None and _has_metadata(n):  # a node made outside every module (the loss)
                return "script"
            return self.module_stack[-1] if self.module_stack else "backward"
        if self.module_stack:
            return self.module_stack[-1] or "model"
        return "script"

    def _dispatch(self, func, args, kwargs):
        name = func._schema.name
        op = _classify.slot_op_of(func)
        phase = self._phase()
        if op is None and phase == "optimizer" and name.split("::")[1] not in _classify.PLUMBING:
            op = "optimizer"
        record = self._records(self.iteration) and self.store_calls and op is not None and \
            _classify.selected(op, self.wanted)
        swap = self.swap is not None and op is not None and _classify.selected(op, {self.swap[0]})
        writes = _written_args(func, args, kwargs)
        keys = None
        if record and writes:  # an in-place (or out=) op: its inputs are kept as they were, as copies known by the originals' keys
            keys = {}

            def before(t):
                c = t.detach().clone()
                keys[id(c)] = (self._key(t), t)
                return c
            args_before = [before(a) if isinstance(a, torch.Tensor) else
                           ([before(u) if isinstance(u, torch.Tensor) else u for u in a] if isinstance(a, (list, tuple)) else a)
                           for a in args]
        else:
            args_before = args
        out = func(*args, **kwargs)
        if writes and self.mode_on:  # what it wrote is new data: no later call may link to the old
            for t in writes:
                k = _storage(t)
                self.generation[k] = self.generation.get(k, 0) + 1
        if op is None:
            short = name.split("::")[1]
            if short in _classify.PLUMBING or short.rstrip("_") in _classify.PLUMBING:
                self.plumbing[short] += 1
            else:
                self.unclassified[name] += 1
            return out
        self.counts[op] += 1
        if swap:
            self.swap_seen += 1
            if self.swap_seen % self.swap_every == 0:
                out = self._swap(func, args, kwargs, out, op, phase)
        if record:
            try:
                self._record(func, args_before, kwargs, out, op, phase, keys, args)
            except Exception as e:  # never break the user's program: count, say at the end
                if os.environ.get("PEAT_DEBUG"):
                    raise
                self.errors["%s: %s" % (name, type(e).__name__)] += 1
        elif phase == "forward" and self.module_stack and isinstance(out, torch.Tensor) and out.grad_fn is not None:
            _name_node(out.grad_fn, self._layer(phase))
        return out

    def _key(self, t):
        """What makes two tensors of one iteration the same stored data: the same memory, layout and
        dtype, with no write to that memory in between. Not the Python object (backward sees
        forward's tensors through other objects), and not the version counter (under a dispatch
        mode PyTorch 2.x does not advance it for _foreach_ writes, such as clip_grad_norm_'s): the
        recorder counts the writes of every op it sees itself. Every keyed tensor is held until the
        iteration ends, so that its memory cannot be reused by another tensor taken for it."""
        return (self.generation.get(_storage(t), 0),) + _where(t)

    def _record(self, func, args, kwargs, out, op, phase, keys=None, args_after=None):
        layer = self._layer(phase)
        if op == "optimizer":
            calls = [_classify._generic("optimizer")(func, args, kwargs, out if not isinstance(out, (list, tuple)) or not out else out[0])] \
                if not func._schema.name.startswith("aten::_foreach") else self._foreach(func, args, kwargs, args_after or args, out)
            calls = [c for group in calls for c in (group if isinstance(group, list) else [group])]
        else:
            calls = _classify.classify(func, args, kwargs, out) or []
        for c in calls:
            if not isinstance(c.output, torch.Tensor) or not storable(c.output):
                continue
            index = self.call_index
            self.call_index += 1
            base = "/runs/%s/iterations/%s/calls/%s/" % (self.run_name, _index(self.iteration), _index(index))
            tensors = []
            for tname, t in c.tensors:
                if not isinstance(t, torch.Tensor) or not storable(t):
                    continue
                # an in-place op's inputs are copies taken before it ran, known by the originals' keys
                key, held = keys[id(t)] if keys and id(t) in keys else (self._key(t), t)
                if key in self.shared:
                    tensors.append((tname, self.shared[key][0]))
                    continue
                self.shared[key] = (base + tname, held)
                tensors.append((tname, t.detach().clone(memory_format=torch.contiguous_format)))
            # the output as it is now: a later call that reads it (unchanged) links to it
            key = self._key(c.output)
            if key in self.shared:
                tensors.append(("output", self.shared[key][0]))
            else:
                self.shared[key] = (base + "output", c.output)
                tensors.append(("output", c.output.detach().clone(memory_format=torch.contiguous_format)))
            params = dict(c.params)
            params.setdefault("variant", c.variant)
            labels = {"aten": c.replay["op"], "replay": _classify.replay_json(c)}
            self.pending.append((layer, c.op, "backward" if phase == "backward" else "forward", index, tensors, params, labels))
            self.recorded_calls += 1
            if phase == "forward" and c.output.grad_fn is not None:
                _name_node(c.output.grad_fn, layer)

    def _foreach(self, func, args, kwargs, args_after, out):
        """A _foreach_ op of an optimiser as one call per tensor of its lists: every list of the
        op's length (tensors, or scalars as in `_foreach_addcdiv_.ScalarList`) gives its i-th item.
        The output is the tensor the op wrote (or returned), as it is after the op."""
        lists = [a for a in args if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor)]
        if not lists:
            return []
        n = len(lists[0])
        pick = lambda a, i: [a[i]] if isinstance(a, (list, tuple)) and len(a) == n else a
        calls = []
        for i in range(n):
            one = [pick(a, i) for a in args]
            kw = {k: pick(v, i) for k, v in kwargs.items()}
            calls.append((one, kw, i))
        outs = None
        if isinstance(args_after, (list, tuple)):
            for j, a in enumerate(args_after):
                if j in _WRITTEN.get(func, ((), ()))[0] and isinstance(a, (list, tuple)) and len(a) == n:
                    outs = a
                    break
        result = []
        for one, kw, i in calls:
            target = outs[i] if outs is not None else None
            if target is None and isinstance(out, (list, tuple)) and len(out) == n:  # an out-of-place op returns its list
                target = out[i]
            if target is None:
                continue
            result.append(_classify._generic("optimizer")(func, one, kw, target))
        return result

    # ---- runtime fault injection ----------------------------------------------------------------
    def _swap(self, func, args, kwargs, out, op, phase):
        from ._playback import run_candidate
        golden = out
        layer = self._layer(phase)
        calls = _classify.classify(func, args, kwargs, out) if op != "optimizer" else []
        variant = calls[0].variant if calls else 0
        cand = self.swap[1]
        row = {"layer": layer, "op": op, "phase": "backward" if phase == "backward" else "forward",
               "variant": ["forward", "grad_input", "grad_weight", "grad_bias", "update"][min(variant, 4)],
               "iteration": self.iteration, "call_index": self.swap_seen}
        if not cand.takes(op, variant):
            return out
        index = calls[0].replay.get("index") if calls else None
        ref = golden if index is None else golden[index]
        result, outcome = run_candidate(cand, func, args, kwargs, ref, index)
        if outcome != "ok":
            row["outcome"] = outcome
            row.update({n: float("nan") for n in _core.error_summary_columns()})
            self.swaps.append(row)
            return out
        row["outcome"] = "ok"
        row.update(_core.summarize(as_float32(ref), as_float32(result)))
        self.swaps.append(row)
        if index is None:
            return result
        return tuple(result if i == index else g for i, g in enumerate(golden))


def _where(t):
    return (t.data_ptr() if t.numel() else 0, tuple(t.shape), tuple(t.stride()), t.dtype, t.device)


_WRITTEN = {}  # ATen op -> (positions, keyword names) of the arguments it writes


def _written_args(func, args, kwargs):
    """The tensors an ATen op writes (in-place, out=, _foreach_ lists), or () for most ops."""
    w = _WRITTEN.get(func)
    if w is None:
        arguments = func._schema.arguments
        w = _WRITTEN[func] = (tuple(i for i, a in enumerate(arguments) if a.alias_info is not None and a.alias_info.is_write),
                              frozenset(a.name for a in arguments if a.alias_info is not None and a.alias_info.is_write))
    positions, names = w
    if not positions:
        return ()
    out = []
    for i in positions:
        v = args[i] if i < len(args) else kwargs.get(func._schema.arguments[i].name)
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(u for u in v if isinstance(u, torch.Tensor))
    return out


def _storage(t):
    """The identity of a tensor's memory, shared by all its views."""
    try:
        return (t.untyped_storage().data_ptr(), t.device)
    except AttributeError:  # PyTorch 1.13
        return (t.storage().data_ptr(), t.device)
    except RuntimeError:  # a tensor without storage (sparse, a functional wrapper)
        return (id(t), t.device)


def _name_graph(output, layer):
    """Names the autograd nodes a module's forward made (those its children did not name), so that
    the backward calls they run carry the module's name (PyTorch 2.x: a dict on each node)."""
    stack, seen = [], set()

    def add(x):
        if isinstance(x, torch.Tensor) and x.grad_fn is not None:
            stack.append(x.grad_fn)
        elif isinstance(x, (list, tuple)):
            for v in x:
                add(v)
        elif isinstance(x, dict):
            for v in x.values():
                add(v)
    add(output)
    while stack:
        fn = stack.pop()
        try:
            meta = fn.metadata
        except Exception:
            return  # PyTorch 1.13
        if "peat_layer" in meta or type(fn).__name__ == "AccumulateGrad":
            continue
        meta["peat_layer"] = layer
        for nxt, _ in fn.next_functions:
            if nxt is not None:
                stack.append(nxt)


def _name_node(fn, layer):
    """Names an autograd node by the module that made it (PyTorch 2.x keeps a dict on each node), so
    that the backward calls it runs carry the module's name."""
    try:
        fn.metadata["peat_layer"] = layer
    except Exception:  # PyTorch 1.13: no node metadata, backward calls are named "backward"
        pass


def _has_metadata(node):
    try:
        node.metadata
        return True
    except Exception:  # PyTorch 1.13
        return False


def _node_layer(node):
    try:
        return node.metadata.get("peat_layer")
    except Exception:
        return None


def current():
    """The recorder active in this process, or None."""
    return _active

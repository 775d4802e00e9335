# SPDX-License-Identifier: MIT
"""PEAT inside your own PyTorch program.

    import peat
    with peat.record("run.h5", ops="gemm", every=10):
        train()                      # your loop: every optimizer.step() is one iteration

or, without changing the script: `peat record -o run.h5 -- python3 train.py` (also
`python3 -m peat record ...`). Then `peat playback -s run.h5 -k python:mykernels:my_gemm --op gemm`
replays the recorded calls through your kernel, and `peat analyze` / the workbench name its error
model. The package links only PEAT's torch-free core (peat._core): it runs beside whatever PyTorch
this process has. docs/record.md.
"""
import contextlib

from . import _core

try:
    import torch  # noqa: F401  the user's PyTorch, whichever version
    TORCH_MISSING = None
except ImportError as _e:  # `python3 -m peat` says so in one line (__main__.py)
    TORCH_MISSING = _e
if TORCH_MISSING is None:
    from ._candidate import CandidateError, attention, gemm, softmax
    from ._playback import PlaybackError, playback
    from ._record import Recorder, current

__version__ = _core.version
__all__ = ["record", "step", "playback", "analyze", "summary", "gemm", "softmax", "attention", "Recorder",
           "CandidateError", "PlaybackError"]


@contextlib.contextmanager
def record(path, ops="all", every=1, iterations=None, checkpoint_every=0, force=False, **options):
    """Records the calls made inside the block into the session `path` (see Recorder for options).
    The run is marked complete, failed (an exception) or cancelled (Ctrl-C) when the block ends."""
    rec = Recorder(path, ops=ops, every=every, iterations=iterations, checkpoint_every=checkpoint_every,
                   force=force, **options).start()
    status = "complete"
    try:
        yield rec
    except KeyboardInterrupt:
        status = "cancelled"
        raise
    except BaseException as e:
        status = "complete" if isinstance(e, SystemExit) and e.code in (None, 0) else "failed"
        raise
    finally:
        rec.stop(status)


def step():
    """Ends the current iteration, for scripts without an optimiser (no-op when not recording)."""
    rec = current()
    if rec is not None:
        rec.end_iteration()


def analyze(session, run, call=""):
    """The analyzer and detector over a playback run (as `peat analyze --session`): verdicts per call."""
    return _core.analyze_session(session, run, call)


def summary(session):
    """The session's runs, iterations and calls as plain dicts."""
    return _core.summary(session)

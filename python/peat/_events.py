# SPDX-License-Identifier: MIT
"""The event stream of docs/events.md (PEAT_EVENTS=jsonl): one JSON object per line on standard
error, for the workbench's run panel and other programs that drive `peat record`."""
import json
import math
import os
import sys
import time

ENABLED = os.environ.get("PEAT_EVENTS") == "jsonl"
_last = 0.0


def _clean(v):
    return None if isinstance(v, float) and not math.isfinite(v) else v


def send(event, **fields):
    if not ENABLED:
        return
    e = {"v": 1, "event": event}
    e.update({k: _clean(v) for k, v in fields.items()})
    try:
        sys.stderr.write(json.dumps(e) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # a reader that went away is not the script's problem
        pass


def due(last=False):
    """Whether a throttled event (progress, loss) may go now: at most ten a second, always the last."""
    global _last
    now = time.monotonic()
    if last or now - _last >= 0.1:
        _last = now
        return True
    return False

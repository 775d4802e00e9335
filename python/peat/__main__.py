# SPDX-License-Identifier: MIT
import sys

from . import TORCH_MISSING

if TORCH_MISSING is not None:
    e = TORCH_MISSING
    sys.stderr.write("peat: error: this Python (%s) cannot import PyTorch (%s): run peat with the interpreter that "
                     "has it (peat record -- /path/to/python3 SCRIPT, or PEAT_PYTHON=/path/to/python3 peat playback ...)\n"
                     % (sys.executable, e))
    sys.exit(1)

from ._cli import main  # noqa: E402

try:
    code = main(sys.argv[1:])
except BrokenPipeError:  # `... | head`: the reader left; no traceback
    import os
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    code = 1
sys.exit(code)

# SPDX-License-Identifier: MIT
"""usage: same_points.py A.h5 B.h5 COUNT
The SAVE campaign points of session B equal those of session A, COUNT rows in each, in every column
but the timings (campaign_merge.sh, mpi.sh); an AssertionError (exit 1) otherwise."""
import sys

import h5py

a = h5py.File(sys.argv[1], "r")["runs/save-campaign/tables/points"][()]
b = h5py.File(sys.argv[2], "r")["runs/save-campaign/tables/points"][()]
assert len(a) == len(b) == int(sys.argv[3]), (len(a), len(b))
for name in a.dtype.names:
    if name != "seconds":
        assert (a[name] == b[name]).all(), name

#!/bin/sh
# SPDX-License-Identifier: MIT
# A stand-in peat-probe that crashes, as a loader may on a crafted file: a test that points
# PEAT_MODULE_DIR here proves that a model file is loaded in the probe first (it must be refused).
kill -SEGV $$

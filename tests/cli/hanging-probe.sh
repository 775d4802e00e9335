#!/bin/sh
# SPDX-License-Identifier: MIT
# A stand-in peat-probe that hangs, as the HDF5 library does on some crafted files: a test that
# points PEAT_MODULE_DIR here proves that a file is read through the probe (it must time out).
exec sleep 60

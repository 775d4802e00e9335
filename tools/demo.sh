#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Sets up, builds and runs the demo: writes a session, summarises it with `peat`, shows the
# machine's backends, and opens the session in peat-workbench. Without a display it renders
# the window under Xvfb to demo/workbench.png instead.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake --preset default
cmake --build --preset default

mkdir -p demo
# Until the profiler records real training (issue 3), the demo session is the format sample.
build/bin/peat-sample-session demo
echo "== peat info demo/sample.h5"
build/bin/peat info demo/sample.h5
echo "== peat env"
build/bin/peat env
if [[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]]; then
  exec build/bin/peat-workbench demo/sample.h5
fi
xvfb-run -a -s '-screen 0 1600x1000x24' build/bin/peat-workbench --screenshot demo/workbench.png demo/sample.h5
echo "== no display: the workbench was rendered to demo/workbench.png"

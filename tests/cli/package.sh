#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The .deb packages: built by CPack from this build tree, their contents and Depends checked, then
# unpacked into a scratch root where the packaged peat must run and find its modules.
#   usage: package.sh BUILD_DIR WORK_DIR
set -eu
build=$1 work=$2
rm -rf "$work" && mkdir -p "$work/out" "$work/root"
(cd "$build" && cpack -G DEB -B "$work/out" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
main=$(ls "$work"/out/peat-workbench_*_amd64.deb)
fail() { echo "package: $*"; exit 1; }

contents=$(dpkg-deb -c "$main" | awk '{print $6}')
[[ -e "$build/lib/peat/libpeat_mpi.so" ]] && { dpkg-deb -c "$main" | grep -q 'usr/lib/peat/libpeat_mpi.so' || fail "the MPI module is not in $(basename "$main")"; }
for f in usr/bin/peat usr/lib/peat/libpeat_torch.so usr/lib/peat/peat-probe usr/share/man/man1/peat.1 \
         usr/share/bash-completion/completions/peat usr/share/doc/peat-workbench/README.md \
         usr/share/doc/peat-workbench/docs/session-format.md usr/share/doc/peat-workbench/docs/images/errorviews.png \
         usr/include/peat/kernel_abi.h usr/share/peat-workbench/slurm/peat-submit.sh; do
  grep -qx "./$f" <<<"$contents" || fail "$f is not in $(basename "$main")"
done
if [[ -x "$build/bin/peat-workbench" ]]; then
  for f in usr/bin/peat-workbench usr/share/applications/io.github.peat.Workbench.desktop \
           usr/share/metainfo/io.github.peat.Workbench.metainfo.xml \
           usr/share/icons/hicolor/scalable/apps/io.github.peat.Workbench.svg usr/share/man/man1/peat-workbench.1; do
    grep -qx "./$f" <<<"$contents" || fail "$f is not in $(basename "$main")"
  done
fi
depends=$(dpkg-deb -f "$main" Depends)
for d in libhdf5 libtorch1.13 libhwy1 zlib1g $([[ -e "$build/lib/peat/libpeat_mpi.so" ]] && echo libopenmpi); do
  grep -q "$d" <<<"$depends" || fail "Depends lacks $d: $depends"
done
[[ -x "$build/bin/peat-workbench" ]] && for d in libqt6widgets6 libqcustomplot2.1-qt6 qt6-qpa-plugins; do
  grep -q "$d" <<<"$depends" || fail "Depends lacks $d: $depends"
done
grep -q libamdhip64 <<<"$depends" && fail "the main package must not pull in ROCm: $depends"
if ls "$work"/out/peat-workbench-hip_*_amd64.deb >/dev/null 2>&1; then
  hip=$(ls "$work"/out/peat-workbench-hip_*_amd64.deb)
  dpkg-deb -c "$hip" | grep -q 'usr/lib/peat/libpeat_gpu_hip.so' || fail "the HIP package lacks its module"
  dpkg-deb -f "$hip" Depends | grep -q "peat-workbench (=" || fail "the HIP package does not depend on peat-workbench"
fi

# unpacked into a scratch root, the packaged programs run and find their modules there
dpkg-deb -x "$main" "$work/root"
"$work/root/usr/bin/peat" --version | grep -q '^peat ' || fail "the packaged peat does not run"
env_json=$("$work/root/usr/bin/peat" env --json)
grep -q "\"module_dir\":\"$work/root/usr/bin/../lib/peat\"" <<<"$env_json" || fail "modules not found in the root: $env_json"
grep -q '"libtorch":{"loaded":true' <<<"$env_json" || fail "the packaged LibTorch module does not load: $env_json"
bash -n "$work/root/usr/share/bash-completion/completions/peat" || fail "the bash completion does not parse"
if command -v groff >/dev/null; then
  warnings=$(groff -man -ww -z "$work/root/usr/share/man/man1/peat.1" 2>&1 || true)
  [[ -z "$warnings" ]] || fail "peat.1: $warnings"
fi
if command -v appstreamcli >/dev/null && [[ -x "$build/bin/peat-workbench" ]]; then
  appstreamcli validate --no-net --pedantic "$work/root/usr/share/metainfo/io.github.peat.Workbench.metainfo.xml" \
    >"$work/appstream.log" 2>&1 || { cat "$work/appstream.log"; fail "the AppStream metainfo does not validate"; }
fi
echo "ok: $(basename "$main") ($(du -h "$main" | cut -f1)), $(wc -l <<<"$contents") entries; Depends: $depends"

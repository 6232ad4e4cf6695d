#!/usr/bin/env bash
# The GPU proof on a bare GPU host (no network, no Docker), in one command and one time budget:
# every GPU check on this host healthy and on the broken case it must fail on
# (`twinbuild gpu-proof`). Run from the repository root.
#
#   scripts/gpu-proof.sh --dry-run                       list each check and its broken case
#   scripts/gpu-proof.sh SOURCES OUT [--budget SECONDS]  build what is run, then prove
#
# The budget (default 480 s) is spent in priority order: host facts, the memory-saver checks, the
# architecture and driver checks, then all-reduce where there are two or more GPUs; each check
# within its own limit. After each check one JSON line is appended to OUT/report.jsonl and
# OUT/table.md is rewritten; OUT/logs.tar.gz bundles the logs. Nothing else is left in OUT (builds
# and logs live in the cache, ~/.cache/twinbuild/gpu-proof). The table is printed at the end.
#
# SOURCES holds each source as a git checkout (a folder) or a `git archive` tarball (.tar, whose
# pax header records the commit); any commit but the pinned one is refused:
#   torch_memory_saver[.tar]          pins.torch-memory-saver's commit (pins/manifest.toml)
#   torch_memory_saver-prefix[.tar]   its pre-fix parent, fdb09ad3 (twinbuild/smoke/gpu_build.py)
#   nccl-tests[.tar]                  pins.collective-tests' CUDA commit
# Environment: PYTHON (default python3: the interpreter holding torch for CUDA), CUDA_HOME (else
# nvcc's own report of its folder, else /usr/local/cuda). A check that does not hold, a budget
# that leaves checks not run, or a proof that proves nothing exits 1; bad input exits 2.
set -euo pipefail

export PYTHON="${PYTHON:-python3}"
repo="$PWD"
[ -f "$repo/pins/manifest.toml" ] || { echo "gpu-proof: run from the repository root" >&2; exit 2; }
proof() { PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m twinbuild gpu-proof "$@"; }

case "${1:-}" in
  --dry-run) shift; proof --dry-run "$@"; exit $? ;;
  ""|-h|--help) sed -n '2,23p' "$0" >&2; exit 2 ;;
esac
[ $# -ge 2 ] || { echo "gpu-proof: usage: scripts/gpu-proof.sh SOURCES OUT [--budget SECONDS]" >&2; exit 2; }
sources="$1" out="$2"
shift 2
budget=480
case "${1:-}" in
  --budget) [ $# -eq 2 ] || { echo "gpu-proof: --budget takes one number of seconds" >&2; exit 2; }
            budget="$2" ;;
  "") ;;
  *) echo "gpu-proof: unknown argument '$1' (usage: SOURCES OUT [--budget SECONDS])" >&2; exit 2 ;;
esac
[ -d "$sources" ] || { echo "gpu-proof: $sources: no such folder (the carried sources)" >&2; exit 2; }
case "$budget" in ''|*[!0-9]*) echo "gpu-proof: --budget $budget: not a whole number of seconds" >&2; exit 2 ;; esac
# The proof holds its budget step by step; this bounds the whole process too (a step past its
# limit is killed with its process group; 60 s leaves room for the last report lines).
exec timeout -k 10 "$((10#$budget + 60))" env PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" \
  "$PYTHON" -m twinbuild gpu-proof --python "$PYTHON" --sources "$sources" --out "$out" \
  --budget "$budget"

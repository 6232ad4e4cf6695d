#!/usr/bin/env bash
# The GPU proof on a bare GPU host (no network, no Docker): build the pinned torch_memory_saver,
# its pre-fix parent and nccl-tests from sources carried in, then run every GPU check on this
# host healthy and on the broken case it must fail on (`twinbuild gpu-proof`): one table on
# stdout, a JSON report in OUT. Run from the repository root.
#
#   scripts/gpu-proof.sh --dry-run          list each check and its broken case (no GPU needed)
#   scripts/gpu-proof.sh SOURCES [OUT]      build and prove; OUT defaults to build/gpu-proof
#
# SOURCES holds each source as a git checkout (a folder) or a `git archive` tarball (.tar, whose
# pax header records the commit); any commit but the one named here is refused:
#   torch_memory_saver[.tar]          pins.torch-memory-saver's commit (pins/manifest.toml)
#   torch_memory_saver-prefix[.tar]   its pre-fix parent, fdb09ad3 (twinbuild/smoke/proof.py)
#   nccl-tests[.tar]                  pins.collective-tests' CUDA commit
# Make them where GitHub is reachable, e.g.
#   git -C torch_memory_saver archive -o SOURCES/torch_memory_saver.tar b5588e83...
# Environment: PYTHON (default python3, the interpreter holding torch for CUDA), CUDA_HOME
# (default: above nvcc), TB_PROOF_TIMEOUT (seconds per check, default 600).
# A piece that does not build (no nvcc, no pip) is logged in OUT/logs and its checks are skipped
# with that reason; a check that does not hold, or a proof that proves nothing, exits 1.
set -euo pipefail

export PYTHON="${PYTHON:-python3}"
repo="$PWD"
[ -f "$repo/pins/manifest.toml" ] || { echo "gpu-proof: run from the repository root" >&2; exit 2; }
proof() { PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m twinbuild gpu-proof "$@"; }

case "${1:-}" in
  --dry-run) proof --dry-run; exit 0 ;;
  ""|-h|--help) sed -n '2,20p' "$0" >&2; exit 2 ;;
esac
sources="$(cd "$1" && pwd)" || { echo "gpu-proof: $1: no such folder" >&2; exit 2; }
out="$(mkdir -p "${2:-build/gpu-proof}" && cd "${2:-build/gpu-proof}" && pwd)"
mkdir -p "$out/logs" "$out/src"
# shellcheck source=scripts/gpu-lib.sh
. "$repo/scripts/gpu-lib.sh"

nvcc="$(command -v nvcc || true)"
if [ -z "${CUDA_HOME:-}" ] && [ -n "$nvcc" ]; then CUDA_HOME="$(dirname "$(dirname "$(readlink -f "$nvcc")")")"; fi
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
[ -n "$nvcc" ] || nvcc="$CUDA_HOME/bin/nvcc"
args=(--python "$PYTHON" --report "$out/report.json" --timeout "${TB_PROOF_TIMEOUT:-600}")

source_of() {  # source_of NAME: the checkout or tarball for NAME in SOURCES
  if [ -e "$sources/$1" ]; then echo "$sources/$1"; else echo "$sources/$1.tar"; fi
}

step() {  # step NAME COMMAND...: run, log to OUT/logs/NAME.log, say how it went
  local name="$1"; shift
  local started=$SECONDS
  if "$@" >"$out/logs/$name.log" 2>&1; then
    echo "gpu-proof: $name: built in $((SECONDS - started))s"
  else
    echo "gpu-proof: $name: failed (see $out/logs/$name.log): its checks are skipped" >&2
    return 1
  fi
}

driver_link() {  # a folder whose libcuda.so the linker takes: the driver's, else CUDA's stub
  local link="$out/link" cand
  if [ ! -e "$link/libcuda.so" ]; then
    for cand in "$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')" \
        /usr/local/nvidia/lib64/libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so.1 \
        "$CUDA_HOME/lib64/stubs/libcuda.so"; do
      if [ -n "$cand" ] && [ -e "$cand" ]; then mkdir -p "$link"; ln -sf "$cand" "$link/libcuda.so"; break; fi
    done
  fi
  echo "$link"
}

build_tms() {  # build_tms SOURCE COMMIT TARGET
  tb_unpack "$1" "$2" "$out/src/$(basename "$3")" || return 1
  local major link
  link="$(driver_link)"
  major="$("$PYTHON" -c 'import torch; print((torch.version.cuda or "").split(".")[0])')" || return 1
  major="${major:-$(tb_pin cu13 - toolkit | cut -d. -f1)}"  # a CPU torch: the manifest's CUDA
  LIBRARY_PATH="$link${LIBRARY_PATH:+:$LIBRARY_PATH}" \
  TMS_CUDA_MAJOR="$major" PATH="$CUDA_HOME/bin:$PATH" "$PYTHON" -m pip install --no-deps \
    --no-build-isolation --no-index --target "$3" "$out/src/$(basename "$3")"
}

build_nccl_tests() {  # build_nccl_tests COMMIT: all_reduce_perf for the manifest's GPU archs
  local stamp="$1 $(tb_pin cu13 - gpu_archs)"
  if [ -x "$out/nccl/all_reduce_perf" ] && [ "$(cat "$out/nccl/.built" 2>/dev/null)" = "$stamp" ]; then
    echo "nccl-tests: $out/nccl/all_reduce_perf is already built from $stamp"
    return 0
  fi
  tb_unpack "$(source_of nccl-tests)" "$1" "$out/src/nccl-tests" || return 1
  local nccl home="$out/nccl-home" gencode="" arch
  nccl="$("$PYTHON" -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])')" || return 1
  mkdir -p "$home/lib"
  ln -sfn "$nccl/include" "$home/include"
  ln -sf "$nccl/lib/libnccl.so.2" "$home/lib/libnccl.so.2"
  ln -sf libnccl.so.2 "$home/lib/libnccl.so"
  for arch in $(tb_pin cu13 - gpu_archs | tr ';' ' '); do
    gencode+=" -gencode=arch=compute_${arch//./},code=sm_${arch//./}"
  done
  make -C "$out/src/nccl-tests" -j"$(nproc)" CUDA_HOME="$CUDA_HOME" NCCL_HOME="$home" \
    NVCC_GENCODE="${gencode# }" BUILDDIR="$out/nccl" src.build || return 1
  echo "$stamp" >"$out/nccl/.built"
}

build_kernels() {  # the same kernel for this GPU and for another architecture
  local cap wrong
  cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')"
  [ -n "$cap" ] || { echo "nvidia-smi gave no compute capability" >&2; return 1; }
  case "$cap" in 8*) wrong=75 ;; *) wrong=80 ;; esac
  cat >"$out/src/kernel.cu" <<'EOF'
extern "C" __global__ void tb_fill(char *p, char v) { p[threadIdx.x] = v; }
EOF
  "$nvcc" -shared -Xcompiler -fPIC -gencode "arch=compute_$cap,code=sm_$cap" \
    -o "$out/kernel-ok.so" "$out/src/kernel.cu" || return 1
  "$nvcc" -shared -Xcompiler -fPIC -gencode "arch=compute_$wrong,code=sm_$wrong" \
    -o "$out/kernel-wrong.so" "$out/src/kernel.cu"
}

tms_commit="$(tb_pin cu13 torch-memory-saver commit)"
prefix_commit="$("$PYTHON" -c 'import sys; sys.path.insert(0, sys.argv[1]); from twinbuild.smoke.proof import PRE_FIX_TMS; print(PRE_FIX_TMS)' "$repo")"
if step tms build_tms "$(source_of torch_memory_saver)" "$tms_commit" "$out/tms"; then
  args+=(--tms "$out/tms")
fi
if step tms-prefix build_tms "$(source_of torch_memory_saver-prefix)" "$prefix_commit" "$out/tms-prefix"; then
  args+=(--tms-broken "$out/tms-prefix")
fi
if step nccl-tests build_nccl_tests "$(tb_pin cu13 collective-tests commit)"; then
  args+=(--perf "$out/nccl/all_reduce_perf")
fi
if step kernels build_kernels; then
  args+=(--kernel-ok "$out/kernel-ok.so" --kernel-wrong "$out/kernel-wrong.so")
fi
# The runtime's folders first, then whatever the host already has (its driver's, say).
args+=(--library-path "$(tb_library_path)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
proof "${args[@]}"

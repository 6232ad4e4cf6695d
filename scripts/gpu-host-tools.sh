#!/usr/bin/env bash
# The GPU checks on a bare GPU host, without Docker: build their tools from the manifest's pinned
# sources, then run `twinbuild smoke --host --gpu`. Run from the repository root.
#
#   scripts/gpu-host-tools.sh fetch  VARIANT    clone torch_memory_saver and the collective tests
#                                               at the commits pins/manifest.toml pins
#   scripts/gpu-host-tools.sh build  VARIANT    venv with torch, torch_memory_saver built from
#                                               that source, all_reduce_perf built from its source
#   scripts/gpu-host-tools.sh check  VARIANT    twinbuild smoke --host --gpu with that venv
#   scripts/gpu-host-tools.sh all    VARIANT    the three in order
#
# VARIANT is a variant of the manifest (`twinbuild variants`), e.g. cu13 or rocm720-mi35x. Settings (environment):
#   TB_GPU_HOME   where sources, venv and binaries go (default /opt/twinbuild-gpu)
#   TB_TORCH      torch requirement for the venv (default: torch, from TB_TORCH_INDEX)
#   TB_TORCH_INDEX  index for it (default: PyTorch's cu130 or rocm7.2 index, per the manifest's
#                 toolkit); set empty to use pip's configuration
#   TB_TMS_REPO, TB_COLLECTIVE_REPO   clone from here instead (a local mirror); the commit must
#                 still be the pinned one
#   TB_BIN        where all_reduce_perf is linked (default /usr/local/bin, the manifest's path)
# The commits are read from pins/manifest.toml; a clone at any other commit is refused.
set -euo pipefail

cmd="${1:-}" variant="${2:-}"
case "$cmd" in fetch|build|check|all) ;; *) sed -n '2,22p' "$0" >&2; exit 2 ;; esac

home="${TB_GPU_HOME:-/opt/twinbuild-gpu}"
bin="${TB_BIN:-/usr/local/bin}"
export PYTHON="${PYTHON:-python3}"
py="$PYTHON"
# shellcheck source=scripts/gpu-lib.sh
. "$PWD/scripts/gpu-lib.sh"
[ -n "$variant" ] && vendor="$(tb_pin "$variant" - vendor 2>/dev/null)" || {
  echo "gpu-host-tools: VARIANT must be one of: $(PYTHONPATH="$PWD" "$PYTHON" -m twinbuild variants --format json | "$PYTHON" -c 'import json,sys; print(" ".join(v["name"] for v in json.load(sys.stdin)))')" >&2
  exit 2
}

# One line per value, from the manifest (through twinbuild's own model).
pin() {  # pin NAME FIELD (NAME "-": the variant's toolkit or gpu_archs)
  tb_pin "$variant" "$@"
}

clone() {  # clone REPO COMMIT DEST
  local repo="$1" commit="$2" dest="$3"
  if [ ! -d "$dest/.git" ]; then
    git init -q "$dest"
    git -C "$dest" remote add origin "$repo"
  else
    git -C "$dest" remote set-url origin "$repo"
  fi
  git -C "$dest" fetch -q --depth 1 origin "$commit"
  git -C "$dest" checkout -q -f --detach FETCH_HEAD
  local head
  head="$(git -C "$dest" rev-parse HEAD)"
  if [ "$head" != "$commit" ]; then
    echo "gpu-host-tools: $repo gave $head, the manifest pins $commit" >&2
    exit 1
  fi
  echo "gpu-host-tools: $dest at $commit"
}

do_fetch() {
  clone "${TB_TMS_REPO:-$(pin torch-memory-saver repo)}" "$(pin torch-memory-saver commit)" "$home/src/torch_memory_saver"
  clone "${TB_COLLECTIVE_REPO:-$(pin collective-tests repo)}" "$(pin collective-tests commit)" "$home/src/collective-tests"
}

do_build() {
  local toolkit venv index
  toolkit="$(pin - toolkit)"
  venv="$home/venv"
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip setuptools wheel numpy
  if [ "$vendor" = nvidia ]; then
    index="${TB_TORCH_INDEX-https://download.pytorch.org/whl/cu${toolkit//./}}"
  else
    index="${TB_TORCH_INDEX-https://download.pytorch.org/whl/rocm${toolkit}}"
  fi
  "$venv/bin/python" -m pip install -q ${index:+--index-url "$index"} "${TB_TORCH:-torch}"
  # torch_memory_saver from the pinned source, as the recipes build it (CUDA: TMS_CUDA_MAJOR from torch).
  if [ "$vendor" = nvidia ]; then
    TMS_CUDA_MAJOR="$("$venv/bin/python" -c 'import torch; print((torch.version.cuda or "'"$toolkit"'").split(".")[0])')" \
      "$venv/bin/python" -m pip install -q --no-build-isolation --no-deps --force-reinstall "$home/src/torch_memory_saver"
  else
    "$venv/bin/python" -m pip install -q --no-build-isolation --no-deps --force-reinstall "$home/src/torch_memory_saver"
  fi
  # all_reduce_perf from the pinned collective tests.
  local src="$home/src/collective-tests" out="$home/bin"
  mkdir -p "$out" "$bin"
  if [ "$vendor" = nvidia ]; then
    # NCCL from the venv's torch dependency (nvidia-nccl-cu13): headers, and a libnccl.so to link.
    local nccl
    nccl="$("$venv/bin/python" -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])')"
    ln -sf libnccl.so.2 "$nccl/lib/libnccl.so"
    # Only the manifest's GPU archs (9.0;10.0;10.3 -> sm_90 sm_100 sm_103): nccl-tests' default
    # list takes ~25 minutes on two cores.
    local gencode="" arch
    for arch in $(pin - gpu_archs | tr ';' ' '); do
      gencode+=" -gencode=arch=compute_${arch//./},code=sm_${arch//./}"
    done
    make -C "$src" -j"$(nproc)" CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" NCCL_HOME="$nccl" \
      NVCC_GENCODE="${gencode# }" BUILDDIR="$out/build"
    # NCCL and the CUDA runtime from the venv's wheels: nothing else puts them on a bare host's
    # library path.
    printf '#!/bin/sh\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
      "$(PYTHON="$venv/bin/python" tb_library_path)" "$out/build/all_reduce_perf" > "$out/all_reduce_perf"
  else
    local archs
    archs="$(pin - gpu_archs)"
    make -C "$src/$(pin collective-tests subdirectory)" -j"$(nproc)" HIP_HOME=/opt/rocm NCCL_HOME=/opt/rocm \
      GPU_TARGETS="${archs//;/ }" BUILDDIR="$out/build"
    printf '#!/bin/sh\nexec "%s" "$@"\n' "$out/build/all_reduce_perf" > "$out/all_reduce_perf"
  fi
  chmod 0755 "$out/all_reduce_perf"
  ln -sf "$out/all_reduce_perf" "$bin/all_reduce_perf"
  echo "gpu-host-tools: $venv/bin/python, $bin/all_reduce_perf"
}

do_check() {
  # torch_memory_saver's preload library links libcudart.so.N, which only the venv's wheels hold
  # on a bare host: the checks' processes need their folders on the library path.
  local libs
  libs="$(PYTHON="$home/venv/bin/python" tb_library_path)"
  LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$py" -m twinbuild smoke --host --gpu --variant "$variant" --python "$home/venv/bin/python" \
    --report-dir "${TB_REPORT_DIR:-build/smoke}"
}

case "$cmd" in
  fetch) do_fetch ;;
  build) do_build ;;
  check) do_check ;;
  all) do_fetch; do_build; do_check ;;
esac

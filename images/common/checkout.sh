#!/usr/bin/env bash
# Check out REPO at COMMIT (or REF when COMMIT is empty) into DEST, detached, keeping .git so
# the smoke suite reads the commit from DEST/.git/HEAD. An existing checkout at DEST (the base
# image's) is reused: its origin is pointed at REPO first. Submodules only with --submodules=1,
# as upstream clones: Megatron-LM with them, rocm-systems (rccl-tests) with none of its ~37 (the
# manifest's MEGATRON_SUBMODULES and COLLECTIVE_SUBMODULES say which).
# Usage: checkout.sh [--submodules=0|1] REPO COMMIT REF DEST
set -euo pipefail
recursive=0
case "${1:-}" in
  --submodules=1) recursive=1; shift ;;
  --submodules=0) shift ;;
  --submodules=*) echo "checkout: ${1} is not --submodules=0 or 1" >&2; exit 2 ;;
esac
repo="$1" commit="$2" ref="$3" dest="$4"
want="${commit:-$ref}"
[ -n "$repo" ] && [ -n "$want" ] && [ -n "$dest" ] || { echo "checkout: REPO, COMMIT or REF, and DEST are required" >&2; exit 2; }
if [ ! -d "$dest/.git" ]; then
  mkdir -p "$dest"
  git -C "$dest" init -q
  git -C "$dest" remote add origin "$repo"
else
  git -C "$dest" remote set-url origin "$repo"
  git -C "$dest" reset -q --hard
fi
git -C "$dest" fetch -q --depth 1 origin "$want"
git -C "$dest" checkout -q -f --detach FETCH_HEAD
if [ -n "$commit" ] && [ "$(git -C "$dest" rev-parse HEAD)" != "$commit" ]; then
  echo "checkout: $repo fetched $(git -C "$dest" rev-parse HEAD), the manifest pins $commit" >&2
  exit 1
fi
if [ "$recursive" = 1 ] && [ -f "$dest/.gitmodules" ]; then
  git -C "$dest" submodule update -q --init --recursive --depth 1
fi
echo "checkout: $repo @ $(git -C "$dest" rev-parse HEAD) in $dest (asked for $want)"

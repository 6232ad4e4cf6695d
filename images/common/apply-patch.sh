#!/usr/bin/env bash
# Apply PATCH (-p1) inside DIR, or fail the build: upstream once shipped TransformerEngine silently
# unpatched because a loop swallowed a patch that did not apply. Usage: apply-patch.sh DIR PATCH
set -euo pipefail
dir="$1" patch_file="$2"
[ -d "$dir" ] && [ -f "$patch_file" ] || { echo "apply-patch: DIR and PATCH must exist ($dir, $patch_file)" >&2; exit 2; }
if ! patch -d "$dir" -p1 --forward --batch < "$patch_file"; then
  echo "apply-patch: $(basename "$patch_file") did not apply cleanly in $dir" >&2
  exit 1
fi
echo "apply-patch: $(basename "$patch_file") applied in $dir"

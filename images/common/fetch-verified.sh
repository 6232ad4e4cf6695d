#!/usr/bin/env bash
# Download URL to DEST only if its sha256 is SHA256; the file stays at DEST so the smoke
# suite can hash it against the manifest. Usage: fetch-verified.sh URL SHA256 DEST [MODE]
set -euo pipefail
url="$1" sha="$2" dest="$3" mode="${4:-0644}"
[ -n "$url" ] && [ -n "$sha" ] && [ -n "$dest" ] || { echo "fetch-verified: URL, SHA256 and DEST are required" >&2; exit 2; }
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
curl -fsSL --retry 3 -o "$tmp" "$url"
if ! echo "${sha}  ${tmp}" | sha256sum -c --status -; then
  echo "fetch-verified: ${url} has sha256 $(sha256sum "$tmp" | cut -d' ' -f1), the manifest pins ${sha}; refusing it" >&2
  exit 1
fi
install -D -m "$mode" "$tmp" "$dest"

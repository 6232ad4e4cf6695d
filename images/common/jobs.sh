#!/usr/bin/env bash
# How many compile jobs this builder can run: one per GB_PER_JOB of the memory the build may
# still use (MemAvailable, capped by the cgroup's limit), at most one per core, at least one.
# A fixed MAX_JOBS overrides the packages' own caps (flash-attn's is ~9 GB per job) and runs a
# large builder out of memory. Usage: MAX_JOBS="$(bash jobs.sh GB_PER_JOB)"
set -euo pipefail
per_job="${1:?usage: jobs.sh GB_PER_JOB}"
kib="$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)"
for limit in /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes; do
  if [ -r "$limit" ] && read -r bytes <"$limit" && [ "$bytes" != max ]; then
    used=0
    for current in /sys/fs/cgroup/memory.current /sys/fs/cgroup/memory/memory.usage_in_bytes; do
      if [ -r "$current" ]; then read -r used <"$current"; break; fi
    done
    room=$(( (bytes - used) / 1024 ))
    if [ "$room" -lt "$kib" ]; then kib="$room"; fi
    break
  fi
done
jobs=$(( kib / (per_job * 1024 * 1024) ))
cores="$(nproc)"
if [ "$jobs" -gt "$cores" ]; then jobs="$cores"; fi
if [ "$jobs" -lt 1 ]; then jobs=1; fi
echo "$jobs"

"""Moving pins: bump, diff, and the upstream reachability check."""

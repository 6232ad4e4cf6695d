"""GitHub Actions: the workflow trust check and the nightly rerun policy."""

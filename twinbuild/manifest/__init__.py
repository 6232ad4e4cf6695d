"""The manifest: its model (the only code that reads pins/), TOML positions, render, pin table."""

"""The twinbuild command: one module per command group."""

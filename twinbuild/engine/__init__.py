"""The engine boundary (the only code that imports docker), the private daemon, the base image."""

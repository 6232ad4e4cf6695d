"""The smoke suite: pytest + testinfra files run against one image (or host), from a JSON spec.

The runner writes the spec and runs ``pytest`` on this directory; nothing here reads the manifest or
talks to the engine directly.
"""

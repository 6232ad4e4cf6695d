"""Smoke tests: start a built image with no network and check it against the manifest.

``collect`` gathers the image's metadata in one command; ``conformance`` compares it with the pins;
``suite/`` holds the pytest + testinfra checks; ``runner`` starts the container and runs the suite;
``gpu`` finds GPUs; ``report`` writes JUnit XML, the JSON summary and the markdown summary.
"""

"""Benchmarks of twinbuild against the plain docker CLI, with figures against each target.

``run(root, out_dir)`` measures, on a throwaway copy of the mini project (tests/fixtures/mini):
no-op decision, one-pin bump, cold builds (sequential vs concurrent, base excluded and included),
smoke metadata collection at 10/100/1000 pins, lint at 10..10,000 generated pins, and import and
lint of real recipes grown to 12,500..100,000 lines. Every measured
variant runs in its own child process, so its peak RSS is that child's ``ru_maxrss`` (from
``os.wait4``); compared variants are interleaved (A B A B ...) so that noise hits both. Numbers are
reported, never asserted. Every image made here is removed at the end, and the
``twinbuild/{cuda,rocm}:local`` tags are put back where they pointed.

Modules: ``stats`` (rows, statistics, the table), ``generate`` (made-up manifests and recipes),
``child`` (the measuring child processes), ``session`` (what a run carries, how a variant is
measured), ``builds``, ``smoke``, ``lint`` and ``recipes`` (the benchmarks), ``runner`` (the run,
the cleanup).
"""

from tools.bench.runner import BenchOptions, bench, run

__all__ = ["BenchOptions", "bench", "run"]

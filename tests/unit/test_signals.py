"""``held()``: a signal already pending when the block starts must not leave the mask blocked."""

from __future__ import annotations

import signal
from collections.abc import Iterable

import pytest

from twinbuild.util import signals


def test_a_signal_handled_as_the_block_starts_still_unblocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A SIGTERM pending before ``held()`` runs its handler as the blocking call returns. The
    exception it raises there must still restore the mask: before, it came out before the
    ``try`` and left SIGINT and SIGTERM blocked in the thread for good, and in every process
    started from it after (found by the fuzz suite's SIGTERM at any point of a write, which
    then broke every later signal test in that pytest worker)."""
    real = signal.pthread_sigmask
    mask_before = real(signal.SIG_BLOCK, ())

    def handler_runs_as_it_returns(how: int, mask: Iterable[int]) -> set[int | signal.Signals]:
        old = real(how, mask)
        if how == signal.SIG_BLOCK and signal.SIGTERM in set(mask):
            raise signals.Stopped(signal.SIGTERM)
        return old

    monkeypatch.setattr(signal, "pthread_sigmask", handler_runs_as_it_returns)
    with pytest.raises(signals.Stopped), signals.held():
        pytest.fail("the block ran although the signal came first")
    monkeypatch.undo()
    assert real(signal.SIG_BLOCK, ()) == mask_before


def test_a_signal_during_the_block_waits_and_the_mask_comes_back() -> None:
    before = signal.pthread_sigmask(signal.SIG_BLOCK, ())
    with signals.held():
        inside = signal.pthread_sigmask(signal.SIG_BLOCK, ())
        assert {signal.SIGINT, signal.SIGTERM} <= inside
    assert signal.pthread_sigmask(signal.SIG_BLOCK, ()) == before

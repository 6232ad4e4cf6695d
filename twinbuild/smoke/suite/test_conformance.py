"""One test per pin of the image (the image holds exactly what the manifest pins), and one per
entry of its lock (its whole closure is exactly the lock's)."""

from __future__ import annotations

import pytest
from packaging.utils import canonicalize_name

from twinbuild.smoke.closure import ClosureResult, check_closure, held_to
from twinbuild.smoke.conformance import Collected, check_base, check_pin
from twinbuild.smoke.spec import PinCase, SuiteSpec


def test_pin(
    pin_case: PinCase, spec: SuiteSpec, holds: dict[str, str], request: pytest.FixtureRequest
) -> None:
    if pin_case.skip is not None:
        pytest.skip(pin_case.skip)
    # Asked for only here: a skipped pin (or a bare GPU host) never runs the collector.
    collected: Collected = request.getfixturevalue("collected")
    result = check_pin(pin_case.pin, collected, where=spec.manifest)
    if result.holds is not None:
        holds[pin_case.pin.name] = result.holds
    if result.outcome == "failed":
        pytest.fail(result.message, pytrace=False)


_FOUND: dict[str, list[ClosureResult]] = {}


def _closure(spec: SuiteSpec, request: pytest.FixtureRequest) -> list[ClosureResult]:
    """Every difference between the image and its lock, compared once per run."""
    if spec.lock is None:
        pytest.skip(spec.lock_skip or "no lock")
    if spec.lock not in _FOUND:
        collected: Collected = request.getfixturevalue("collected")
        lock = held_to(spec.lock, spec.base_capture)
        checkouts = {
            c.pin.name: c.pin.values.path
            for c in spec.pins
            if c.skip is None and c.pin.install == "checkout" and c.pin.values.path
        }
        left_out = frozenset(c.pin.name for c in spec.pins if c.skip is not None)
        _FOUND[spec.lock] = check_closure(
            lock, collected, source=spec.lock, checkouts=checkouts, left_out=left_out
        )
    return _FOUND[spec.lock]


def test_closure(closure_entry: str, spec: SuiteSpec, request: pytest.FixtureRequest) -> None:
    """The image holds this locked package exactly at the lock's version (or commit)."""
    mine = [r for r in _closure(spec, request) if r.package == canonicalize_name(closure_entry)
            or r.package == closure_entry]  # fmt: skip
    if mine:
        pytest.fail("\n".join(r.message for r in mine), pytrace=False)


def test_closure_holds_nothing_else(spec: SuiteSpec, request: pytest.FixtureRequest) -> None:
    """No distribution in the image that the lock does not have: each one a line."""
    extra = [r for r in _closure(spec, request) if not r.locked]
    if extra:
        pytest.fail("\n".join(r.message for r in extra), pytrace=False)


def test_base(spec: SuiteSpec) -> None:
    if spec.base is None:
        pytest.skip(spec.base_skip or "no image to inspect")
    ok, message = check_base(
        expected=spec.base.expected,
        labels=spec.base.labels,
        layers=spec.base.layers,
        base_layers=spec.base.base_layers,
    )
    if not ok:
        pytest.fail(message, pytrace=False)

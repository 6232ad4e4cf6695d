"""One test per pin of the image: the image holds exactly what the manifest pins."""

from __future__ import annotations

import pytest

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

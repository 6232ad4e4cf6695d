"""The base capture's reading of the image's answer, and its file, without an engine.

The capture against a real image is tests/docker/test_base_capture.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from twinbuild.closure.capture import read_capture
from twinbuild.engine.base_capture import _MARK, Captured, embedded_path, parse_output
from twinbuild.errors import EngineError

COMMIT = "b" * 40


def _answer(rows: list[list[str]], dpkg: str) -> str:
    return "a sitecustomize line\n" + json.dumps(rows) + f"\n{_MARK}\n" + dpkg


def test_the_first_distribution_of_a_name_counts_and_commits_are_kept() -> None:
    out = _answer(
        [["PyYAML", "6.0.1", ""], ["pyyaml", "5.0", ""], ["gitdist", "0.1", COMMIT]],
        "ii \tpython3\t3.11.2-1+b1\nrc \tgone\t1.0\nii \tlibc6\t2.36-9\n",
    )
    got = parse_output(out, ok=True, ref="r", image="r@sha256:x")
    assert got.dists == {"pyyaml": "6.0.1", "gitdist": "0.1"}
    assert got.commits == {"gitdist": COMMIT}
    assert got.apt == {"python3": "3.11.2-1+b1", "libc6": "2.36-9"}  # "rc": removed, not here


@pytest.mark.parametrize(
    "output",
    ["sh: 1: python3: not found\n", "[]\n", "Traceback ...\nSyntaxError: bad\n"],
)
def test_an_image_that_cannot_list_is_one_line(output: str) -> None:
    with pytest.raises(EngineError) as err:
        parse_output(output, ok=False, ref="some/image:1", image="x")
    assert "\n" not in str(err.value)
    assert "some/image:1" in str(err.value)
    assert "python3" in str(err.value)


def test_the_capture_file_reads_back_with_its_commits(tmp_path: Path) -> None:
    captured = Captured(
        image="twinbuild/base:1@sha256:" + "1" * 64,
        dists={"pip": "23.0.1", "gitdist": "0.1"}, commits={"gitdist": COMMIT},
        apt={"python3": "3.11.2-1+b1"},
    )  # fmt: skip
    path = embedded_path(tmp_path, "sha256:" + "1" * 64)
    assert path == tmp_path / "base-capture" / f"venv-{'1' * 64}.toml"
    path.parent.mkdir()
    path.write_text(captured.text())
    back = read_capture(path)
    assert back is not None
    assert (back.image, back.dists, back.apt, back.commits) == (
        captured.image, captured.dists, captured.apt, captured.commits,
    )  # fmt: skip


def test_a_variants_base_is_pulled_by_digest_run_without_network_and_committed(
    tmp_path: Path,
) -> None:
    """`twinbuild base capture --variant V --arch A`'s library: the base pulled by digest where
    absent, run by its id on network none, its capture written under pins/lock/base/."""
    from tests.fake_engine import FakeEngine
    from twinbuild.engine.api import RunResult
    from twinbuild.engine.base_capture import capture_variant
    from twinbuild.manifest.model import ImageKey

    ref = "lmsysorg/sglang:v1@sha256:" + "a" * 64
    engine = FakeEngine(registry={ref: "sha256:" + "9" * 64})
    engine.run_result = RunResult(
        exit_code=0, output=_answer([["torch", "2.9.1", ""]], "ii \tpython3\t3.12.3\n")
    )
    path = capture_variant(engine, tmp_path, ImageKey(variant="cu13", arch="linux/amd64"), ref)
    assert path == tmp_path / "pins/lock/base/cu13-amd64.toml"
    assert engine.calls.count("pull") == 1
    (ran, command) = engine.ran[0]
    assert ran == "sha256:" + "9" * 64  # by id
    assert command[:2] == ["sh", "-c"]
    back = read_capture(path)
    assert back is not None
    assert (back.image, back.dists, back.apt) == (ref, {"torch": "2.9.1"}, {"python3": "3.12.3"})


def test_a_base_without_a_digest_is_refused_before_anything_is_pulled(tmp_path: Path) -> None:
    from tests.fake_engine import FakeEngine
    from twinbuild.engine.base_capture import capture_variant
    from twinbuild.errors import ConfigError
    from twinbuild.manifest.model import ImageKey

    engine = FakeEngine()
    with pytest.raises(ConfigError) as err:
        capture_variant(engine, tmp_path, ImageKey(variant="cu13", arch="linux/amd64"), "b:v1")
    assert "has no digest" in str(err.value)
    assert engine.calls == []


def test_the_embedded_capture_makes_the_venv_word_for_word_as_the_local_recipe() -> None:
    """The capture of the embedded base lists what the local layers' venv sees: if the recipe
    made its venv another way (without the system site, or with other seeds), the capture would
    count other distributions as the base's."""
    from twinbuild.engine.base_capture import IN_LOCAL_VENV, LOCAL_VENV

    recipe = Path(__file__).resolve().parents[2] / "images" / "local" / "Dockerfile"
    runs = [line for line in recipe.read_text().splitlines() if "-m venv" in line]
    assert runs == [f"RUN {LOCAL_VENV}"]
    assert IN_LOCAL_VENV.startswith(LOCAL_VENV)

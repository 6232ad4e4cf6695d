"""The pure pieces of the benchmarks: statistics, the table, the generated manifests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import image
from tests.unit.test_cli_handlers import NOWHERE, _no_engine
from tools.bench.__main__ import build_parser, main
from tools.bench.generate import generate_manifest, smoke_manifest, write_project
from tools.bench.stats import (
    Row,
    fit_exponent,
    median,
    nlogn_ratio,
    ratio,
    table,
)
from twinbuild.engine import client
from twinbuild.lint.checks import lint
from twinbuild.manifest.loader import load, loads


def test_median_of_odd_and_even_counts() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5


def test_median_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"^median of no values$"):
        median([])


def test_ratio_is_value_over_baseline_and_none_without_a_baseline() -> None:
    assert ratio(1.0, 4.0) == 0.25
    assert ratio(None, 4.0) is None
    assert ratio(1.0, None) is None
    assert ratio(1.0, 0.0) is None


def test_fit_exponent_recovers_the_power() -> None:
    ns = [10, 100, 1000]
    assert fit_exponent(ns, [n**2 * 1e-6 for n in ns]) == pytest.approx(2.0)
    assert fit_exponent(ns, [n * 1e-3 for n in ns]) == pytest.approx(1.0)


def test_nlogn_ratio() -> None:
    # t(10n)/t(n) for n log n: 10 * log(10n) / log(n); for n = 100 that is 10 * 3 / 2.
    assert nlogn_ratio(100) == pytest.approx(15.0)
    assert nlogn_ratio(1000) == pytest.approx(40 / 3)  # 10 * 4 / 3
    assert nlogn_ratio(10) == pytest.approx(20.0)  # 10 * 2 / 1


def test_row_median_and_table_cells() -> None:
    rows = [
        Row(benchmark="b", variant="base", seconds=(2.0, 4.0, 3.0), rss_mib=50.4, ratio=1.0,
            target="baseline"),
        Row(benchmark="b", variant="fast", seconds=(0.5,), ratio=0.1666, target="<= 1 s",
            met=True, note="x|y"),
        Row(benchmark="c", variant="not measured", seconds=(), met=False),
    ]  # fmt: skip
    assert rows[0].median == 3.0
    assert rows[2].median is None
    assert table(rows, "Machine: test").splitlines() == [
        "Machine: test",
        "",
        "| benchmark | variant | median s | runs | ratio vs baseline | peak RSS MiB | target | met? |",
        "|---|---|---:|---:|---:|---:|---|---|",
        "| b | base | 3.000 | 3 | 1.00x | 50 | baseline | - |",
        "| b | fast (x\\|y) | 0.500 | 1 | 0.17x | - | <= 1 s | yes |",
        "| c | not measured | - | 0 | - | - | - | NO |",
    ]


def test_generated_manifest_has_every_kind_of_pin() -> None:
    manifest = loads(generate_manifest(100), Path("pins/manifest.toml"))
    pins = manifest.pins.values()
    assert len(manifest.pins) == 100
    assert sum(1 for p in pins if p.divergence) == 10
    assert sum(1 for p in pins if p.asymmetry) == 10
    assert sorted(manifest.layers()) == ["l0", "l1", "l2", "late"]


def test_generated_100_pin_project_lints_clean(tmp_path: Path) -> None:
    path = write_project(tmp_path, 100)
    report = lint(load(path), tmp_path)
    assert [str(f) for f in report.findings] == []


def test_too_small_a_manifest_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^generate_manifest needs n >= 10"):
        generate_manifest(9)


def test_smoke_manifest_pins_what_the_fabricated_image_holds() -> None:
    manifest = loads(smoke_manifest(3), Path("m.toml"))
    assert [(r.name, r.values.version) for r in manifest.resolve(image("cuda"))] == [
        ("benchdist-00000", "1.0.0"),
        ("benchdist-00001", "1.0.1"),
        ("benchdist-00002", "1.0.2"),
    ]


def test_cleanup_restores_tags_and_removes_only_what_the_run_made(tmp_path: Path) -> None:
    from tests.fake_engine import FakeEngine
    from tools.bench.runner import _cleanup
    from tools.bench.session import Session

    engine = FakeEngine()
    engine.add_image("sha256:old", {}, "twinbuild/cuda:local")  # the user's image, kept
    engine.add_image("sha256:base", {"org.twinbuild.base-inputs": "h"})
    engine.add_image("sha256:layer", {"org.twinbuild.base-inputs": "h"})  # a build layer on it
    engine.add_image("sha256:new", {}, "twinbuild/rocm:local")
    engine.tag("sha256:new", "twinbuild/cuda:local")
    said: list[str] = []
    s = Session(root=tmp_path, work=tmp_path, env={}, say=said.append, quick=True)
    s.created, s.bases = ["sha256:base", "sha256:new"], ["h"]
    before = {"twinbuild/cuda:local": "sha256:old", "twinbuild/rocm:local": None}
    _cleanup(engine, s, before, said.append)
    assert engine.images["twinbuild/cuda:local"]["Id"] == "sha256:old"
    assert set(engine.images) == {"sha256:old", "twinbuild/cuda:local"}
    assert said == []


def test_grow_repeats_a_real_recipe_to_exactly_n_lines() -> None:
    from tools.bench.recipes import PAIR, grow

    source = (Path(__file__).parents[2] / PAIR / "Dockerfile").read_text()
    grown = grow(source, 1000)
    assert grown.count("\n") == 1000
    assert grown.startswith(source)
    # every size parses: a cut inside a continued RUN used to leave an open quote at 100,000.
    # 100,000 lines are whole copies and then the cut that one copy and the same rest make, so
    # that smaller recipe is the one parsed (parsing all 100,000 lines took 2.5 s).
    from twinbuild.recipe.scan import parse_text

    length = len(source.splitlines())
    whole, rest = divmod(100_000, length)
    assert grow(source, 100_000) == source * (whole - 1) + grow(source, length + rest)
    for n in (length + rest, 1000, 999, length + 7):
        parse_text(grow(source, n), Path(f"grown-{n}"))
    with pytest.raises(ValueError, match="empty source recipe"):
        grow("", 10)


def test_bench_without_an_engine_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tempfile

    monkeypatch.setattr(client, "connect", _no_engine)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # bench's work folder
    monkeypatch.setenv("DOCKER_HOST", NOWHERE)
    repo = Path(__file__).resolve().parents[2]
    code = main(["--quick", "--root", str(repo), "--out", str(tmp_path / "bench")])
    assert code == 3
    assert capsys.readouterr().err == (
        f"twinbuild: {NOWHERE}: no Docker engine answers; run `twinbuild engine up`\n"
    )


@pytest.mark.parametrize("flag", ["--root", "--out", "--quick"])
def test_each_option_reaches_bench_options(
    flag: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """As tests/unit/test_cli_options.py does for twinbuild's own commands."""
    from tests.unit.test_cli_options import Reached, _argv, _assert_typed, _carried, _matches

    def record(options: object, *args: object, **kwargs: object) -> Any:
        raise Reached(options)

    monkeypatch.setattr("tools.bench.runner.bench", record)
    monkeypatch.chdir(tmp_path)
    parser = build_parser()
    action = next(a for a in parser._actions if flag in a.option_strings)
    argv, expected = _argv(parser, action)
    with pytest.raises(Reached) as reached:
        main(argv)
    options = reached.value.options
    _assert_typed(options)
    assert any(_matches(v, expected) for v in _carried(options, action.dest))


def test_only_an_unknown_benchmark_is_one_line_exit_2_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools.bench.__main__ import main

    code = main(["--root", str(tmp_path), "--out", str(tmp_path / "out"), "--only", "emulaton"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("twinbuild: --only 'emulaton': no such benchmark; one of: cold builds, ")
    assert err.rstrip().endswith(", emulation, growth, registry deadline, lock, constraints")
    assert err.count("\n") == 1
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_row_that_could_not_be_measured_fails_the_bench(tmp_path: Path) -> None:
    from tools.bench.runner import NOT_MEASURED, check_measured
    from twinbuild.errors import FindingsError

    measured = Row(benchmark="b", variant="base", seconds=(1.0,))
    check_measured([measured], tmp_path / "bench.md")  # every row measured: nothing to say
    lost = Row(
        benchmark="registry build cache", variant=NOT_MEASURED, seconds=(),
        note="FileNotFoundError: build/local/cuda/build.log",
    )  # fmt: skip
    with pytest.raises(FindingsError) as caught:
        check_measured([measured, lost], tmp_path / "bench.md")
    assert str(caught.value) == (
        "bench: 1 not measured: registry build cache (FileNotFoundError: "
        f"build/local/cuda/build.log); the report, with the rows that were, is {tmp_path}/bench.md"
    )

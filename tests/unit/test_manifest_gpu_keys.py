"""The variant keys only the GPU smoke run reads: kernel_modules, shm_size, all_reduce_floors.

Each bad entry is one line naming file, line and key; they are not image inputs, so changing one
moves no image digest."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import image, mini_project
from twinbuild.manifest.loader import ManifestError, load
from twinbuild.manifest.model import BandwidthFloor

FLOORS = """
kernel_modules = ["flash_attn_2_cuda", "flash_attn_3._C"]
shm_size = "32g"

[[variants.cuda.all_reduce_floors]]
gpu = "NVIDIA H200"
gpus = 8
busbw_gbs = 225
source = "datasheet"

[[variants.cuda.all_reduce_floors]]
gpu = "NVIDIA H200"
gpus = 4
busbw_gbs = 180.5
source = "a run"
"""


def _with(tmp_path: Path, text: str) -> Path:
    root = mini_project(tmp_path)
    path = root / "pins/manifest.toml"
    body = path.read_text(encoding="utf-8")
    head, rest = body.split("[variants.rocm]", 1)
    path.write_text(head.rstrip("\n") + "\n" + text + "\n[variants.rocm]" + rest, encoding="utf-8")
    return path


def _errors(path: Path) -> list[str]:
    with pytest.raises(ManifestError) as err:
        load(path)
    return err.value.messages


def test_the_keys_load(tmp_path: Path) -> None:
    spec = load(_with(tmp_path, FLOORS)).variants["cuda"]
    assert spec.kernel_modules == ("flash_attn_2_cuda", "flash_attn_3._C")
    assert spec.shm_size == "32g"
    assert [(f.gpu, f.gpus, f.busbw_gbs, f.source) for f in spec.all_reduce_floors] == [
        ("NVIDIA H200", 8, 225.0, "datasheet"),
        ("NVIDIA H200", 4, 180.5, "a run"),
    ]
    assert isinstance(spec.all_reduce_floors[0], BandwidthFloor)
    assert (
        load(mini_project(tmp_path / "plain") / "pins/manifest.toml")
        .variants["cuda"]
        .all_reduce_floors
        == ()
    )


def test_they_are_not_image_inputs(tmp_path: Path) -> None:
    plain = load(mini_project(tmp_path / "plain") / "pins/manifest.toml")
    with_keys = load(_with(tmp_path, FLOORS))
    for profile in ("production", "local"):
        assert with_keys.image_digest(image("cuda"), profile) == plain.image_digest(
            image("cuda"), profile
        )


def test_each_bad_entry_is_one_line_naming_its_key(tmp_path: Path) -> None:
    bad = FLOORS.replace("gpus = 4", "gpus = 1").replace('source = "a run"', 'source = ""')
    bad = bad.replace('shm_size = "32g"', 'shm_size = "lots"').replace('"flash_attn_3._C"', '"a-b"')
    bad += '\n[[variants.cuda.all_reduce_floors]]\ngpu = "NVIDIA H200"\ngpus = 8\nbusbw_gbs = "fast"\nsource = "x"\nextra = 1\n'
    path = _with(tmp_path, bad)
    messages = _errors(path)
    text = path.read_text(encoding="utf-8").splitlines()

    def line_of(needle: str, nth: int = 0) -> int:
        return [i for i, line in enumerate(text, 1) if line.startswith(needle)][nth]

    assert messages == [
        f"{path}:{line_of('kernel_modules')}: variants.cuda.kernel_modules: 'a-b' is not a "
        "module name (dotted Python identifiers)",
        f"{path}:{line_of('[[variants.cuda.all_reduce_floors]]', 1) + 2}: "
        "variants.cuda.all_reduce_floors[1].gpus: 1: one GPU moves no data between GPUs; a "
        "floor is for 2 or more",
        f"{path}:{line_of('source', 1)}: variants.cuda.all_reduce_floors[1].source: empty; say "
        "where the number comes from",
        f"{path}:{line_of('extra')}: variants.cuda.all_reduce_floors[2].extra: unknown key; "
        "known keys: gpu, gpus, busbw_gbs, source",
        f"{path}:{line_of('busbw_gbs', 2)}: variants.cuda.all_reduce_floors[2].busbw_gbs: "
        "expected a number of GB/s above 0, got 'fast'",
        f"{path}:{line_of('shm_size')}: variants.cuda.shm_size: 'lots' is not a size: digits and "
        "a unit b, k, m or g, e.g. '32g'; or leave shm_size out so GPU containers share the "
        "host's IPC namespace (--ipc=host)",
    ]


def test_a_second_floor_for_the_same_gpus_and_a_wrong_shape(tmp_path: Path) -> None:
    twice = FLOORS.replace("gpus = 4", "gpus = 8")
    path = _with(tmp_path, twice)
    (message,) = _errors(path)
    assert message.endswith(
        "variants.cuda.all_reduce_floors[1]: a second floor for 8x NVIDIA H200; keep one"
    )
    flat = _with(tmp_path / "flat", 'all_reduce_floors = "fast"\n')
    (message,) = _errors(flat)
    assert message.endswith(
        "variants.cuda.all_reduce_floors: expected an array of tables "
        "([[variants.cuda.all_reduce_floors]]), got string"
    )

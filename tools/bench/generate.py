"""Made-up inputs for the benchmarks: manifests and recipes of any number of pins, and the image
whose fabricated dist-infos the smoke benchmark collects."""

from __future__ import annotations

from pathlib import Path

LAYERS = ("l0", "l1", "l2", "late")
HEADER = """schema = 2

[variants.cuda]
archs = ["linux/amd64"]
recipe = "cuda"
runners = { build = ["self-hosted", "builder", "cuda"], gpu = ["self-hosted", "gpu", "cuda"] }
base = { repository = "lmsysorg/sglang", tag = "v0", digest = "sha256:%s" }
python = "3.11"
toolkit = "12.9"
vendor = "nvidia"
gpu_archs = ["9.0"]

[variants.rocm]
archs = ["linux/amd64"]
recipe = "rocm"
runners = { build = ["self-hosted", "builder", "rocm"], gpu = ["self-hosted", "gpu", "rocm"] }
base = { repository = "rocm/sgl-dev", tag = "v0", digest = "sha256:%s" }
python = "3.11"
toolkit = "7.0"
vendor = "amd"
gpu_archs = ["gfx942"]

[local]
suite = "bookworm"
packages = ["python3", "python3-venv", "git"]
""" % ("1" * 64, "2" * 64)  # noqa: UP031 (braces of TOML inline tables)


def generate_manifest(n: int) -> str:
    """A valid manifest of ``n`` pins (n >= 10): mostly pypi pins across both platforms and four
    layers, every tenth one-platform (with its asymmetry), every tenth divergent (with its
    divergence), every tenth a git pin installed by pip, every hundredth a git checkout."""
    if n < 10:
        raise ValueError("generate_manifest needs n >= 10 (so every layer has a pin)")
    parts = [HEADER]
    for i in range(n):
        name = f"p{i:05d}"
        sha = f"{i:040x}"
        if i % 100 == 50:
            parts.append(
                f'\n[pins.{name}]\nkind = "git"\nrepo = "https://example.invalid/{name}"\n'
                f'commit = "{sha}"\ndist = ""\ninstall = "checkout"\npath = "/opt/src/{name}"\n'
                f'why = "bench checkout {i}"\n'
            )
        elif i % 10 == 3:
            plat = "cuda" if i % 20 == 3 else "rocm"
            parts.append(
                f'\n[pins.{name}]\nkind = "pypi"\nversion = "1.0.{i}"\nvariants = ["{plat}"]\n'
                f'asymmetry = "bench: {plat} only"\nlayer = "late"\nwhy = "bench pin {i}"\n'
            )
        elif i % 10 == 7:
            parts.append(
                f'\n[pins.{name}]\nkind = "pypi"\nlayer = "late"\nwhy = "bench pin {i}"\n'
                f'divergence = {{ cuda = "bench: each variant has its own build", '
                f'rocm = "bench: each variant has its own build" }}\n'
                f'[pins.{name}.cuda]\nversion = "1.0.{i}"\n'
                f'[pins.{name}.rocm]\nversion = "1.1.{i}"\n'
            )
        elif i % 10 == 5:
            parts.append(
                f'\n[pins.{name}]\nkind = "git"\nrepo = "https://example.invalid/{name}"\n'
                f'commit = "{sha}"\nlayer = "{LAYERS[i % 4]}"\nwhy = "bench git pin {i}"\n'
            )
        else:
            parts.append(
                f'\n[pins.{name}]\nkind = "pypi"\nversion = "1.0.{i}"\nlayer = "{LAYERS[i % 4]}"\n'
                f'why = "bench pin {i}"\n'
            )
    return "".join(parts)


def generate_recipes(n: int) -> dict[str, str]:
    """The three recipes for :func:`generate_manifest` ``(n)``: every layer file copied and pip
    installed, every checkout pin's ARGs declared and used (production recipes only: the local
    profile skips checkouts)."""
    checkouts = [f"P{i:05d}" for i in range(n) if i % 100 == 50]
    layers = "".join(
        f"COPY .twinbuild/pip/{layer}.txt /tmp/{layer}.txt\n"
        f"RUN pip install --no-deps -r /tmp/{layer}.txt\n"
        for layer in LAYERS
    )
    clones = "".join(
        f"ARG {p}_REPO\nARG {p}_COMMIT\n"
        f"RUN git clone ${{{p}_REPO}} /opt/src/{p.lower()} && "
        f"git -C /opt/src/{p.lower()} checkout ${{{p}_COMMIT}}\n"
        for p in checkouts
    )
    production = f"ARG BASE_IMAGE\nFROM ${{BASE_IMAGE}}\n{clones}{layers}"
    local = (
        f"ARG BASE_IMAGE\nFROM ${{BASE_IMAGE}} AS common\n{layers}\n"
        "FROM common AS cuda\nENV MILES_HARDWARE_PLATFORM=cuda\n\n"
        "FROM common AS rocm\nENV MILES_HARDWARE_PLATFORM=rocm\n"
    )
    return {
        "images/cuda/Dockerfile": production,
        "images/rocm/Dockerfile": production,
        "images/local/Dockerfile": local,
    }


def write_project(root: Path, n: int) -> Path:
    """A lint project of ``n`` generated pins under ``root``; returns the manifest path."""
    for rel, text in generate_recipes(n).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    manifest = root / "pins/manifest.toml"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(generate_manifest(n))
    return manifest


def smoke_manifest(n: int) -> str:
    """A manifest whose ``n`` pypi pins match what :data:`FABRICATE` writes for ``n``."""
    return HEADER + "".join(
        f'\n[pins.benchdist-{i:05d}]\nkind = "pypi"\nversion = "1.0.{i}"\nwhy = "bench"\n'
        for i in range(n)
    )


FABRICATE = """import sys, sysconfig
from pathlib import Path
site = Path(sysconfig.get_paths()["purelib"])
for i in range(int(sys.argv[1])):
    name, version = f"benchdist-{i:05d}", f"1.0.{i}"
    info = site / f"benchdist_{i:05d}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n")
"""
SMOKE_RECIPE = """ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY fabricate.py /tmp/fabricate.py
RUN python3 -m venv --without-pip --system-site-packages /opt/venv \\
 && /opt/venv/bin/python /tmp/fabricate.py %d
"""


def variants_manifest(n: int, *, pins: int = 20) -> str:
    """A valid manifest of ``n`` variants (CUDA and ROCm in turn, each in its vendor's group:
    ``nvidia``, ``amd``) and ``pins`` pypi pins on every one of them, one of them set per group."""
    parts = ['schema = 2\n\n[groups.nvidia]\nvendor = "nvidia"\n\n[groups.amd]\nvendor = "amd"\n']
    for i in range(n):
        cuda = i % 2 == 0
        platform, digest = ("cuda", "1" * 64) if cuda else ("rocm", "2" * 64)
        parts.append(
            f'\n[variants.v{i:05d}]\narchs = ["linux/amd64"]\nrecipe = "{platform}"\n'
            f'runners = {{ build = ["self-hosted", "builder", "{platform}"], '
            f'gpu = ["self-hosted", "gpu", "{platform}"] }}\n'
            f'base = {{ repository = "bench/{platform}", tag = "v0", '
            f'digest = "sha256:{digest}" }}\n'
            f'python = "3.11"\ntoolkit = "{"12.9" if cuda else "7.0"}"\n'
            f'vendor = "{"nvidia" if cuda else "amd"}"\n'
            f'gpu_archs = ["{"9.0" if cuda else "gfx942"}"]\n'
        )
    parts.append('\n[local]\nsuite = "bookworm"\npackages = ["python3", "python3-venv", "git"]\n')
    for i in range(pins):
        parts.append(
            f'\n[pins.p{i:05d}]\nkind = "pypi"\nversion = "1.0.{i}"\nlayer = "late"\n'
            f'why = "bench pin {i}"\n'
        )
    parts.append(
        '\n[pins.grouped]\nkind = "pypi"\nlayer = "late"\nwhy = "bench: one version per vendor"\n'
        'divergence = { nvidia = "bench: its own build", amd = "bench: its own build" }\n'
        '[pins.grouped.nvidia]\nversion = "1.0.0"\n[pins.grouped.amd]\nversion = "1.1.0"\n'
    )
    return "".join(parts)


def staged_recipes(n: int) -> dict[str, str]:
    """Two recipes of ``n`` stages each built FROM the one before, a pinned pip install in every
    tenth (what `twinbuild import` reads)."""
    out: dict[str, str] = {}
    for platform, image in (("cuda", "nvidia/cuda:12.9.1-devel"), ("rocm", "rocm/dev:7.0")):
        lines = [f"FROM {image} AS s0"]
        for i in range(1, n):
            lines.append(f"FROM s{i - 1} AS s{i}")
            if i % 10 == 0:
                lines.append(f"RUN pip install bench-{i}==1.0.{i}")
        out[platform] = "\n".join(lines) + "\n"
    return out


def pinned_recipes(n: int) -> dict[str, str]:
    """Two recipes of ``n`` pinned pip installs each, every third one at another version on
    ROCm (a divergent pin, with its two platform tables in the draft)."""
    out: dict[str, str] = {}
    for platform, image in (("cuda", "nvidia/cuda:12.9.1-devel"), ("rocm", "rocm/dev:7.0")):
        lines = [f"FROM {image}"]
        for i in range(n):
            minor = 1 if platform == "rocm" and i % 3 == 0 else 0
            lines.append(f"RUN pip install bench-{i}==1.{minor}.{i}")
        out[platform] = "\n".join(lines) + "\n"
    return out

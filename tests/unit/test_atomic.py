"""The atomic writer writes only regular files, follows links to them and stays in its folder."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from twinbuild.errors import ConfigError
from twinbuild.util.atomic import write_atomic


def test_through_a_symlink_the_linked_file_is_replaced_and_the_link_kept(tmp_path: Path) -> None:
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    real = real_dir / "manifest.toml"
    real.write_text("old\n")
    real.chmod(0o640)
    link = tmp_path / "manifest.toml"
    link.symlink_to(real)
    write_atomic(link, "new\n")
    assert link.is_symlink()
    assert link.readlink() == real
    assert real.read_text() == "new\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    # the temporary file was made beside the real file, not beside the link
    assert sorted(p.name for p in real_dir.iterdir()) == ["manifest.toml"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.toml", "real"]


def test_a_dangling_link_creates_the_file_it_names(tmp_path: Path) -> None:
    link = tmp_path / "out.json"
    link.symlink_to("made.json")
    write_atomic(link, "{}")
    assert link.is_symlink()
    assert (tmp_path / "made.json").read_text() == "{}"


def test_a_fifo_is_refused_and_kept(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError) as err:
        write_atomic(fifo, "x")
    assert str(err.value) == (
        f"{fifo}: is a FIFO (named pipe), not a regular file; "
        "twinbuild writes only regular files, pass a file path"
    )
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "keep").write_text("k")
    with pytest.raises(ConfigError, match=r"is a directory, not a regular file"):
        write_atomic(folder, "x")
    assert (folder / "keep").read_text() == "k"


def test_a_device_node_is_refused_and_kept(tmp_path: Path) -> None:
    node = tmp_path / "null"
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs CAP_MKNOD (root)")
    link = tmp_path / "via-link"
    link.symlink_to(node)
    with pytest.raises(ConfigError) as err:
        write_atomic(link, "x")
    assert str(err.value) == (
        f"{link}: is a character device (through the link to {node}), not a regular file; "
        "twinbuild writes only regular files, pass a file path"
    )
    assert stat.S_ISCHR(node.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null", "via-link"]


def test_never_writes_outside_the_folder_it_was_given(tmp_path: Path) -> None:
    inside = tmp_path / "context"
    inside.mkdir()
    escape = inside / ".twinbuild" / "pip" / ".." / ".." / ".." / "escaped.txt"
    with pytest.raises(ConfigError) as err:
        write_atomic(escape, "x", within=inside)
    assert str(err.value) == (
        f"{escape}: resolves to {tmp_path / 'escaped.txt'}, outside {inside}; refusing to write "
        "there (check the names that built this path)"
    )
    link = inside / "link.txt"
    link.symlink_to(tmp_path / "victim.txt")
    with pytest.raises(ConfigError, match=r"outside"):
        write_atomic(link, "x", within=inside)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["context"]


def test_a_new_file_that_cannot_be_written_says_nothing_was_written(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError) as err:
        write_atomic(blocker / "sub" / "x.json", "{}")
    assert str(err.value) == (
        f"{blocker / 'sub' / 'x.json'}: cannot write: Not a directory; nothing was written; "
        "check that the folder exists and is writable, then re-run"
    )

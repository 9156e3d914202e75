"""Downloads written past the page cache (store/_direct_write.py): whole aligned pieces go to the
disk through O_DIRECT, the rest through the page cache; a blob without Content-MD5 staged from
Azurite onto a local disk leaves (almost) none of itself in the page cache, one with an MD5
(read back in file order) goes through it. Residency is read by util-linux's ``fincore``."""

from __future__ import annotations

import errno
import mmap
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from azurite import Azurite, read_tree
from stoker.stage import stage
from stoker.store import _copy_down, _direct_write
from stoker.store._direct_write import ALIGN, DirectWriter
from test_stage_durability import upload_in_blocks

MiB = 1 << 20


def resident(path: Path) -> int:
    """Bytes of ``path`` in the page cache."""
    out = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.split()[0])


def aligned(data: bytes) -> memoryview:
    """``data`` in page-aligned memory, as the store's reading threads hand pieces over."""
    buf = mmap.mmap(-1, len(data))
    buf[:] = data
    return memoryview(buf)


def write_in_pieces(writer: DirectWriter, data: bytes) -> None:
    """``data`` through ``writer`` in 1 MiB aligned pieces, in order."""
    for pos in range(0, len(data), MiB):
        writer.write(pos, aligned(data[pos : pos + MiB]))


def pwrite_fails(monkeypatch: pytest.MonkeyPatch, err: int, on: int | None = None) -> None:
    """The writes' ``pwrite`` fails with ``err`` (on descriptor ``on`` only, if given)."""
    real = os.pwrite

    def failing(fd: int, piece: Any, pos: int) -> int:
        if on is None or fd == on:
            raise OSError(err, os.strerror(err))
        return real(fd, piece, pos)

    monkeypatch.setattr(_direct_write.write_all.__globals__["os"], "pwrite", failing)


def fresh(tmp_path: Path, size: int) -> tuple[Path, int]:
    path = tmp_path / "f.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.ftruncate(fd, size)
    return path, fd


def test_whole_aligned_pieces_skip_the_page_cache_and_the_tail_does_not(tmp_path: Path) -> None:
    data = os.urandom(4 * MiB + 1000)
    path, fd = fresh(tmp_path, len(data))
    writer = DirectWriter(path, fd)
    if not writer.bypassing:
        pytest.fail(f"{tmp_path} refused O_DIRECT: this test needs a local disk (ext4, XFS)")
    write_in_pieces(writer, data)
    writer.close()
    os.close(fd)
    assert resident(path) <= ALIGN  # only the tail (1,000 bytes: one page) went through it
    assert path.read_bytes() == data


def test_a_piece_off_the_alignment_goes_through_the_page_cache(tmp_path: Path) -> None:
    data = os.urandom(3 * MiB)
    path, fd = fresh(tmp_path, len(data))
    writer = DirectWriter(path, fd)
    writer.write(0, aligned(data[: MiB + 100]))  # (its length is off)
    writer.write(MiB + 100, data[MiB + 100 :])  # (its offset is off)
    assert writer.bypassing  # (a piece it never tried direct does not turn it off)
    writer.close()
    os.close(fd)
    assert path.read_bytes() == data
    assert resident(path) >= 2 * MiB


def test_a_file_system_that_refuses_it_gets_the_page_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = os.open

    def refusing(path: Any, flags: int, *args: Any) -> int:
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    data = os.urandom(2 * MiB)
    path, fd = fresh(tmp_path, len(data))
    monkeypatch.setattr(_direct_write.os, "open", refusing)
    writer = DirectWriter(path, fd)
    assert not writer.bypassing
    write_in_pieces(writer, data)
    writer.close()
    os.close(fd)
    assert path.read_bytes() == data


def test_a_write_refused_for_its_alignment_is_written_through_the_page_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = os.urandom(2 * MiB)
    path, fd = fresh(tmp_path, len(data))
    writer = DirectWriter(path, fd)
    # (a device whose logical blocks are larger than ALIGN refuses the direct descriptor's write)
    pwrite_fails(monkeypatch, errno.EINVAL, on=writer.direct)
    write_in_pieces(writer, data)  # the first refused, then the file goes the same way
    assert not writer.bypassing
    monkeypatch.undo()
    os.close(fd)
    assert path.read_bytes() == data


def test_a_full_disk_is_a_disk_error_not_a_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, fd = fresh(tmp_path, 2 * MiB)
    writer = DirectWriter(path, fd)
    pwrite_fails(monkeypatch, errno.ENOSPC)
    with pytest.raises(OSError, match="No space"):
        writer.write(0, aligned(os.urandom(MiB)))
    monkeypatch.undo()
    writer.close()
    os.close(fd)


@pytest.mark.parametrize("md5", [False, True], ids=["blocks-no-md5", "with-md5"])
def test_a_staged_blob_bypasses_the_page_cache_only_when_nothing_reads_it_back(
    blob_env: str, azurite: Azurite, tmp_path: Path, md5: bool
) -> None:
    data = os.urandom(24 * MiB + 333)
    box = azurite.client(blob_env)
    if md5:
        box.get_blob_client("d/x.bin").upload_blob(data)  # (one Put Blob: the service's MD5)
    else:
        upload_in_blocks(box, {"d/x.bin": data})
    if not _copy_down.local_disk(_local_store(tmp_path)):
        pytest.fail(f"{tmp_path} is not on a local file system: this test needs one")
    dst = tmp_path / "dst"
    summary = stage(f"{blob_env}/d", str(dst), block_size=8 * MiB)
    assert summary.ok, summary.failed
    if md5:
        assert resident(dst / "x.bin") >= len(data) // 2  # written and read back through it
    else:
        assert resident(dst / "x.bin") <= ALIGN  # the tail's page alone
    assert read_tree(dst) == {"x.bin": data}


def _local_store(path: Path) -> Any:
    from stoker.store import open_store

    path.mkdir(parents=True, exist_ok=True)
    return open_store(str(path))

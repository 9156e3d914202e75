"""stoker.stage.stage against a real Azurite: every direction, incremental re-runs, deletion
mirroring, selection, dry runs, rank shards, unsafe keys and secrets."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from azurite import ACCOUNT_KEY, Azurite, blob_tree, partials, read_tree
from stoker.errors import AccessDeniedError, StageError, StokerError
from stoker.shard import owner
from stoker.stage import stage

BLOCK = 1 << 20  # small blocks keep the data small while large files still split
BIG = "data/big.bin"


def dataset() -> dict[str, bytes]:
    """31 files in nested folders, 0 B to 2.5 MiB; one (BIG) spans three blocks."""
    rng = random.Random(20240601)
    sizes = [0, 1, 17, 100, 511, 512, 1000, 4095, 4096, 4097, 10_000, 65_536, 100_001, 300_000]
    files: dict[str, bytes] = {}
    folders = ["", "a/", "a/b/", "a/b/c/", "logs/", "data/shards/"]
    for i in range(30):
        folder = folders[i % len(folders)]
        ext = (".txt", ".bin", ".json")[i % 3]
        files[f"{folder}f{i:02d}{ext}"] = rng.randbytes(sizes[i % len(sizes)])
    files[BIG] = rng.randbytes(2 * BLOCK + BLOCK // 2 + 3)
    return files


# ------------------------------------------------------------------------------ the two sides
@dataclass
class Side:
    kind: str
    url: str
    read: Callable[[], dict[str, bytes]]
    put: Callable[[str, bytes], None]
    remove: Callable[[str], None]
    root: Path | None = None  # POSIX only

    def fill(self, files: dict[str, bytes]) -> None:
        for key, data in files.items():
            self.put(key, data)


def posix_side(root: Path) -> Side:
    def put(key: str, data: bytes) -> None:
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    root.mkdir(parents=True, exist_ok=True)
    return Side(
        "posix", str(root), lambda: read_tree(root), put, lambda k: (root / k).unlink(), root
    )


def blob_side(azurite: Azurite, container: Any, prefix: str) -> Side:
    return Side(
        "blob",
        f"az://{container.container_name}/{prefix}",
        lambda: blob_tree(container, prefix + "/"),
        lambda k, d: container.upload_blob(f"{prefix}/{k}", d, overwrite=True),
        lambda k: container.delete_blob(f"{prefix}/{k}"),
    )


@pytest.fixture
def make_side(azurite: Azurite, blob_env: str, tmp_path: Path) -> Callable[[str, str], Side]:
    """``make_side(kind, name)``: a fresh POSIX folder or Blob container (credentials for
    Azurite are in the environment through ``blob_env``)."""
    first = [azurite.client(blob_env)]

    def make(kind: str, name: str) -> Side:
        if kind == "posix":
            return posix_side(tmp_path / name)
        container = first.pop() if first else azurite.container()
        return blob_side(azurite, container, name)

    return make


def check_no_partials(*sides: Side) -> None:
    for side in sides:
        if side.root is not None:
            assert partials(side.root) == []


DIRECTIONS = [("posix", "blob"), ("blob", "posix"), ("posix", "posix"), ("blob", "blob")]


@pytest.mark.parametrize(("src_kind", "dst_kind"), DIRECTIONS, ids=lambda k: k)
def test_copy_every_direction(
    make_side: Callable[[str, str], Side], src_kind: str, dst_kind: str
) -> None:
    files = dataset()
    total = sum(len(d) for d in files.values())
    src, dst = make_side(src_kind, "src"), make_side(dst_kind, "dst")
    src.fill(files)

    def copy(**kwargs: Any) -> Any:
        summary = stage(src.url, dst.url, block_size=BLOCK, concurrency=8, **kwargs)
        assert summary.ok, (summary.failed, summary.refused)
        check_no_partials(src, dst)
        return summary

    first = copy()
    assert dst.read() == files
    assert (first.files_total, first.bytes_total) == (len(files), total)
    assert (first.files_copied, first.bytes_copied) == (len(files), total)
    assert (first.files_skipped, first.bytes_skipped, first.files_deleted) == (0, 0, 0)

    again = copy()
    assert (again.files_copied, again.bytes_copied) == (0, 0)
    assert (again.files_skipped, again.bytes_skipped) == (len(files), total)

    files["a/b/f02.json"] = b"changed, and a different size"
    src.put("a/b/f02.json", files["a/b/f02.json"])
    changed = copy()
    assert (changed.files_copied, changed.files_skipped) == (1, len(files) - 1)
    assert changed.bytes_copied == len(files["a/b/f02.json"])
    assert dst.read() == files

    gone = files.pop("logs/f04.bin")
    src.remove("logs/f04.bin")
    kept = copy()
    assert kept.files_deleted == 0 and kept.files_copied == 0
    assert dst.read() == {**files, "logs/f04.bin": gone}

    mirrored = copy(delete=True)
    assert mirrored.files_deleted == 1 and mirrored.files_copied == 0
    assert dst.read() == files
    assert copy(delete=True).files_deleted == 0


def test_include_and_exclude(make_side: Callable[[str, str], Side]) -> None:
    """Globs match whole keys (fnmatch: ``*`` also crosses ``/``)."""
    files = dataset()
    src, dst = make_side("blob", "src"), make_side("posix", "dst")
    src.fill(files)
    summary = stage(
        src.url,
        dst.url,
        include=("*.txt", "data/*"),
        exclude=("a/b/*", "*f12*"),
        block_size=BLOCK,
    )
    expected = {
        k: v
        for k, v in files.items()
        if (k.endswith(".txt") or k.startswith("data/"))
        and not k.startswith("a/b/")
        and "f12" not in k
    }
    assert BIG in expected and "f12.txt" not in expected and "a/b/f02.json" not in expected
    assert "a/f01.bin" not in expected and "a/b/c/f03.txt" not in expected
    assert {"f00.txt", "a/f07.bin"} & set(expected) == {"f00.txt"}
    assert summary.ok and summary.files_copied == len(expected)
    assert dst.read() == expected


@pytest.mark.parametrize(("src_kind", "dst_kind"), [("blob", "posix"), ("posix", "blob")])
def test_dry_run_copies_nothing(
    make_side: Callable[[str, str], Side], src_kind: str, dst_kind: str
) -> None:
    files = dataset()
    total = sum(len(d) for d in files.values())
    src, dst = make_side(src_kind, "src"), make_side(dst_kind, "dst")
    src.fill(files)
    dry = stage(src.url, dst.url, dry_run=True, block_size=BLOCK)
    assert dry.dry_run
    assert (dry.files_copied, dry.bytes_copied) == (len(files), total)
    assert (dry.files_total, dry.bytes_total) == (len(files), total)
    assert dst.read() == {}
    check_no_partials(dst)
    # A dry run leaves nothing that makes the real run skip a file.
    real = stage(src.url, dst.url, block_size=BLOCK)
    assert real.files_copied == len(files) and dst.read() == files
    dry = stage(src.url, dst.url, dry_run=True, block_size=BLOCK)
    assert (dry.files_copied, dry.bytes_copied, dry.files_skipped) == (0, 0, len(files))


def test_rank_shards_partition_the_dataset(make_side: Callable[[str, str], Side]) -> None:
    files = dataset()
    src = make_side("blob", "src")
    src.fill(files)
    world = 3
    seen: dict[str, int] = {}
    for rank in range(world):
        dst = make_side("posix", f"rank{rank}")
        summary = stage(src.url, dst.url, rank=rank, world_size=world, block_size=BLOCK)
        got = dst.read()
        assert summary.ok and summary.files_copied == len(got) > 0
        for key, data in got.items():
            assert key not in seen, f"{key} copied by ranks {seen[key]} and {rank}"
            assert owner(key, world) == rank
            assert data == files[key]
            seen[key] = rank
    assert set(seen) == set(files)


def test_rank_from_environment(
    make_side: Callable[[str, str], Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    files = dataset()
    src = make_side("blob", "src")
    src.fill(files)

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    dst = make_side("posix", "by-rank")
    stage(src.url, dst.url, block_size=BLOCK)
    assert set(dst.read()) == {k for k in files if owner(k, 3) == 1}

    # Staging is per node: torchrun's node rank and node count win over the process rank.
    monkeypatch.setenv("RANK", "7")
    monkeypatch.setenv("WORLD_SIZE", "16")
    monkeypatch.setenv("GROUP_RANK", "0")  # torchrun: node 0 of 16 / 8 = 2 nodes
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    dst = make_side("posix", "by-node")
    stage(src.url, dst.url, block_size=BLOCK)
    assert set(dst.read()) == {k for k in files if owner(k, 2) == 0}

    with pytest.raises(StageError, match="--rank 3"):
        stage(src.url, dst.url, rank=3, world_size=3)


UNSAFE = [
    "a/../../evil",
    "../evil2",
    "b//c",
    "d/./e",
    "long/" + "n" * 300,
    ".stoker/injected",
    "f.stoker-partial",
]


def test_unsafe_keys_are_refused(
    make_side: Callable[[str, str], Side], azurite: Azurite, tmp_path: Path
) -> None:
    safe = {"ok/one.bin": b"1" * 1000, "two.txt": b"2", "ok/deep/three": b"3" * 5000}
    src = make_side("blob", "src")
    src.fill(safe)
    container = src.url.split("/")[2]  # az://CONTAINER/PREFIX
    for key in UNSAFE:
        azurite.put_raw(container, f"src/{key}", b"evil payload")
    listed = {b.name for b in azurite.service().get_container_client(container).list_blobs()}
    assert {f"src/{k}" for k in UNSAFE} <= listed  # Azurite kept the names as they are
    dst = make_side("posix", "dst")
    around = sorted(p.name for p in tmp_path.iterdir())

    summary = stage(src.url, dst.url, block_size=BLOCK)

    assert not summary.ok
    assert len(summary.refused) == len(UNSAFE)
    for key in UNSAFE:
        assert any(repr(key) in message for message in summary.refused), key
    assert dst.read() == safe and summary.files_copied == len(safe)
    assert sorted(p.name for p in tmp_path.iterdir()) == around  # nothing beside dst
    assert not [p for p in tmp_path.parent.iterdir() if p.name.startswith("evil")]
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert path.read_bytes() != b"evil payload", path
    check_no_partials(dst)


def test_secrets_never_shown(
    make_side: Callable[[str, str], Side], azurite: Azurite, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {"x/one": b"1" * 10, BIG: b"b" * (BLOCK + 1)}
    src, dst = make_side("posix", "src"), make_side("blob", "dst")
    src.fill(files)
    summaries = [stage(src.url, dst.url, block_size=BLOCK)]
    back = make_side("posix", "back")
    summaries.append(stage(dst.url, back.url, block_size=BLOCK))
    assert back.read() == files
    for summary in summaries:
        text = str(summary.to_dict()) + repr(summary)
        assert ACCOUNT_KEY not in text and ACCOUNT_KEY[:20] not in text
        assert "AccountKey" not in text

    # Errors: a container that does not exist, and a key the service refuses.
    messages = []
    with pytest.raises(StokerError) as err:
        stage("az://no-such-container", back.url)
    messages.append(str(err.value))
    wrong_key = "V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3JvbmdLZXk="
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        azurite.connection_string.replace(ACCOUNT_KEY, wrong_key),
    )
    with pytest.raises(StokerError) as err:
        stage(dst.url, back.url)
    messages.append(str(err.value))
    # Writing with the wrong key stops the job at the first upload refused, not file by file.
    with pytest.raises(AccessDeniedError) as err:
        stage(src.url, dst.url.replace("/dst", "/elsewhere"), block_size=BLOCK)
    messages.append(str(err.value))
    assert "check the credentials" in messages[-1]
    assert len(messages) == 3
    for message in messages:
        for secret in (ACCOUNT_KEY, wrong_key):
            assert secret not in message and secret[:20] not in message, message
        assert "AccountKey=" not in message


def test_the_api_twin_reads_like_the_cli(tmp_path: Path) -> None:
    import inspect

    import stoker

    assert "block_size" in inspect.signature(stoker.stage).parameters  # not (*args, **kwargs)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.bin").write_bytes(b"a" * 3000)
    summary = stoker.stage(str(tmp_path / "src"), str(tmp_path / "dst"), block_size="1 MiB")
    assert summary.ok and (tmp_path / "dst" / "a.bin").read_bytes() == b"a" * 3000


def test_a_name_that_is_not_utf8_is_refused_and_the_rest_copied(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "ok.txt").write_bytes(b"ok")
    with open(os.path.join(os.fsencode(src), b"caf\xe9.txt"), "wb") as f:  # Latin-1, not UTF-8
        f.write(b"x")
    summary = stage(str(src), str(tmp_path / "dst"))
    assert summary.files_copied == 1 and (tmp_path / "dst" / "ok.txt").read_bytes() == b"ok"
    assert len(summary.refused) == 1 and "caf\\xe9.txt: the name is not UTF-8" in summary.refused[0]


def test_a_folder_replaced_by_a_file_is_mirrored_with_delete(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "y").mkdir(parents=True)
    (src / "y" / "z").write_bytes(b"z")
    assert stage(str(src), str(dst)).ok
    (src / "y" / "z").unlink()
    (src / "y").rmdir()
    (src / "y").write_bytes(b"now a file")
    first = stage(str(src), str(dst), delete=True)  # y/z goes, and the folder it leaves
    assert first.files_deleted == 1 and not (dst / "y").is_dir()
    again = stage(str(src), str(dst), delete=True)
    assert again.ok and (dst / "y").read_bytes() == b"now a file"


def test_a_missing_container_is_created_or_named_once(
    azurite: Azurite, blob_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As AzCopy does, an export creates its container; credentials that cannot (a container
    SAS) get one error naming it, where every file failed alone with a bare 404."""
    from stoker.errors import NoContainerError
    from stoker.stage import verify

    src = tmp_path / "src"
    for i in range(6):
        (src / f"d/{i}.bin").parent.mkdir(parents=True, exist_ok=True)
        (src / f"d/{i}.bin").write_bytes(os.urandom(3000 + i))
    made = f"az://not-yet-{random.randrange(10**9)}/data"
    assert stage(str(src), made).files_copied == 6 and verify(str(src), made).ok
    nowhere = f"{azurite.endpoint}/never-made-{random.randrange(10**9)}"
    sas = azurite.sas(nowhere.rsplit("/", 1)[1], read=True, write=True, create=True, list=True)
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING")
    with pytest.raises(NoContainerError, match="the container does not exist.*az storage"):
        stage(str(src), f"{nowhere}?{sas}")
    with pytest.raises(
        NoContainerError, match=r"there is no container 'never-made-.*check the URL"
    ):
        stage(f"{nowhere}?{sas}", str(tmp_path / "back"))


def test_a_write_only_sas_can_export_again(
    azurite: Azurite, blob_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CI job's upload SAS may write but not list: the re-run's check of what an earlier run
    copied needs a listing, and refused the whole run."""
    src = tmp_path / "src"
    for i in range(4):
        (src / f"{i}.bin").parent.mkdir(parents=True, exist_ok=True)
        (src / f"{i}.bin").write_bytes(os.urandom(2000 + i))
    name = blob_env.rsplit("/", 1)[1]
    url = f"{azurite.endpoint}/{name}/out?{azurite.sas(name, write=True, create=True)}"
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING")
    state = tmp_path / "state"
    assert stage(str(src), url, state_dir=state).files_copied == 4
    (src / "4.bin").write_bytes(b"new")
    again = stage(str(src), url, state_dir=state)
    assert again.ok and again.files_copied == 1 and again.files_skipped == 4
    assert any("cannot list" in note for note in again.notes)
    with pytest.raises(AccessDeniedError, match="--delete needs"):
        stage(str(src), url, state_dir=state, delete=True)

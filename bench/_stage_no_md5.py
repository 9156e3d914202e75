"""Shape D of the stage benchmark: large blobs uploaded in blocks, with no Content-MD5.

AzCopy, the SDKs and obstore upload a large file as blocks (Put Block, Put Block List), and the
service then keeps no MD5 unless the uploader sets one: most multi-GiB files in real accounts
are like this. Here A's files are uploaded that way (the SDK, 8 MiB blocks, untimed), each
blob checked to have no Content-MD5, and the import is run by stoker (its defaults: the files
hashed as they arrive, ``batch`` durability on this local disk; and ``--durability fsync``),
rclone with its defaults and tuned (``--transfers 16``, as for the other shapes), AzCopy and
the plain SDK.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _peers import Azurite
from _stage_data import MiB, Shape
from _stage_tools import Tools

BLOCK = 8 * MiB  # as AzCopy's default block size
THREADS = 8


def upload_in_blocks(shape: Shape, data: Path, az: Azurite, container: str) -> None:
    """Upload ``shape``'s files under ``container/NAME/`` as blocks, with no Content-MD5."""
    from azure.storage.blob import BlobBlock, BlobServiceClient

    client = BlobServiceClient.from_connection_string(az.connection_string)
    box = client.get_container_client(container)
    with ThreadPoolExecutor(THREADS) as pool:
        for key, size in zip(shape.keys, shape.sizes, strict=True):
            blob = box.get_blob_client(f"{shape.name}/{key}")
            path = data / key

            def put(offset: int, blob=blob, path=path) -> str:  # noqa: ANN001
                block_id = uuid.uuid4().hex
                with open(path, "rb") as f:
                    f.seek(offset)
                    blob.stage_block(block_id, f.read(BLOCK))
                return block_id

            ids = list(pool.map(put, range(0, size, BLOCK)))
            blob.commit_block_list([BlobBlock(block_id=i) for i in ids])
            props = blob.get_blob_properties()
            if props.content_settings.content_md5 or props.size != size:
                raise RuntimeError(f"{key}: uploaded with an MD5 or the wrong size ({props.size})")


def commands(
    shape: Shape, tools: Tools, container: str
) -> dict[str, Callable[[str], tuple[list[str], dict[str, str]]]]:
    """The imports that shape D adds, or runs otherwise, by tool name."""
    src_az, src_rclone = f"az://{container}/{shape.name}", f":azureblob:{container}/{shape.name}"
    return {
        "stoker-fsync": lambda dst: tools.stoker(src_az, dst, "durability=fsync"),
        "rclone-defaults": lambda dst: tools.rclone(src_rclone, dst, upload=False, tuned=False),
    }

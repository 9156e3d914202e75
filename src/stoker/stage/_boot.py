"""Finished units recorded before a reboot are not trusted.

A download records each finished unit as the stream passes it, so that a ``kill -9`` costs at
most a unit per request. The unit is then in the page cache, not yet on the disk (under every
durability, its file is made durable only before it is named): a process crash keeps it, a
power cut or kernel crash may not. A partial file's unit rows written in another boot of the
machine are therefore forgotten, and those files fetched whole again. The manifest keeps the
boot they were written in (``meta`` row ``boot``).
"""

from __future__ import annotations

from pathlib import Path

from ._manifest import Manifest

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")  # Linux: a new random id each boot


def boot_id() -> str | None:
    """This boot's id, or None where the system does not say (then units are trusted)."""
    try:
        return BOOT_ID.read_text().strip() or None
    except OSError:
        return None


def forget_units_of_another_boot(manifest: Manifest, now: str | None = None) -> int:
    """Drop the unit rows written in a boot other than ``now`` (this one); how many. Called
    before a run reads any, it stamps the manifest with ``now``."""
    now = now or boot_id()
    if now is None:
        return 0
    db = manifest.db
    row = db.execute("SELECT v FROM meta WHERE k = 'boot'").fetchone()
    if row is not None and row[0] == now:
        return 0
    # (no row: a manifest older than it, whose units' boot is unknown, or a new one, with none)
    with manifest.transaction():
        dropped = db.execute("DELETE FROM blocks").rowcount
        db.execute("INSERT OR REPLACE INTO meta VALUES('boot', ?)", (now,))
    return dropped

"""The per-job manifest: one SQLite file that makes a copy resumable after ``kill -9``.

Each object has a row (key, size, etag, source MD5, the hash of what was written, state, the
run that last listed it); each finished block of a large object has a row too, so a resumed
copy re-sends only the blocks that were in flight. WAL mode keeps every committed row across a
process crash; listing streams in batches, so memory does not grow with the object count.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import StageError
from ..store import ObjectInfo
from ._guard import state_error

PENDING, DONE = 0, 1
_IN_CHUNK = 500  # keys per "IN (...)": well under SQLite's limit on bound parameters
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT);
CREATE TABLE IF NOT EXISTS objects(
    key TEXT PRIMARY KEY, size INTEGER NOT NULL, etag TEXT NOT NULL, md5 TEXT,
    hash TEXT, state INTEGER NOT NULL, seen INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS blocks(
    key TEXT NOT NULL, etag TEXT NOT NULL, idx INTEGER NOT NULL,
    PRIMARY KEY(key, etag, idx)) WITHOUT ROWID;
"""


Pending = tuple[str, int, str, str | None]  # an object to copy: key, size, etag, source MD5


@dataclass
class Listed:
    """One listing batch as recorded: the objects to copy (key, size, etag, md5), and how
    many files and bytes of it an earlier run already copied."""

    pending: list[Pending] = field(default_factory=list)
    done_files: int = 0
    done_bytes: int = 0


def job_id(src: str, dst: str, selection: str) -> str:
    return hashlib.blake2b(f"{src}\n{dst}\n{selection}".encode(), digest_size=8).hexdigest()


class _Db:
    """The manifest's connection, whose every failure (a full disk: "database or disk is
    full"; a read-only one) is a StageError that names the manifest and what to do: the
    engine stops the run on it, once, and the rows committed before it stay."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    def execute(self, sql: str, args: Any = ()) -> sqlite3.Cursor:
        try:
            return self.conn.execute(sql, args)
        except sqlite3.Error as exc:
            raise state_error(self.path, exc) from exc

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        try:
            return self.conn.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise state_error(self.path, exc) from exc

    def executescript(self, sql: str) -> sqlite3.Cursor:
        try:
            return self.conn.executescript(sql)
        except sqlite3.Error as exc:
            raise state_error(self.path, exc) from exc

    def close(self) -> None:
        self.conn.close()


class Manifest:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.db = _Db(path)
        except (OSError, sqlite3.Error) as exc:
            raise state_error(path, exc) from exc
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")  # durable across a process crash
            self.db.executescript(_SCHEMA)
        except StageError:
            self.db.close()
            raise
        self._done: list[tuple[str | None, str]] = []
        self.earlier_done = True  # (until start_run knows better)
        self.present = False  # whether the destination's listing is in the table "present"

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN ... COMMIT (or ROLLBACK). The connection runs in autocommit mode, where
        ``with db:`` would not open a transaction and every row would commit on its own."""
        self.db.execute("BEGIN")
        try:
            yield
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.conn.in_transaction:  # (a failed COMMIT may have rolled back already)
                with contextlib.suppress(sqlite3.Error):
                    self.db.conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Commit the queued done marks and close (closed even when the commit fails)."""
        try:
            self.flush()
        finally:
            self.db.close()

    def start_run(self) -> int:
        row = self.db.execute("SELECT v FROM meta WHERE k='run'").fetchone()
        run = int(row[0]) + 1 if row else 1
        self.db.execute("INSERT OR REPLACE INTO meta VALUES('run', ?)", (str(run),))
        # Only an earlier run's done rows can be in a listed batch (each key is listed once
        # per run): without any, record_listing need not look for them.
        self.earlier_done = self.any_done()
        return run

    def record_listing(self, batch: list[ObjectInfo], run: int) -> Listed:
        """Upsert a listing batch: unchanged done objects stay done, changed ones restart.
        Returns what of the batch is to copy and what an earlier run already copied."""
        rows = [(o.key, o.size, o.etag, o.md5, run) for o in batch]
        with self.transaction():
            self.db.executemany(
                """INSERT INTO objects(key, size, etag, md5, hash, state, seen)
                   VALUES(?, ?, ?, ?, NULL, 0, ?)
                   ON CONFLICT(key) DO UPDATE SET
                     state = CASE WHEN objects.size = excluded.size
                                   AND objects.etag = excluded.etag THEN objects.state ELSE 0 END,
                     hash = CASE WHEN objects.size = excluded.size
                                  AND objects.etag = excluded.etag THEN objects.hash ELSE NULL END,
                     size = excluded.size, etag = excluded.etag, md5 = excluded.md5,
                     seen = excluded.seen""",
                rows,
            )
            done: set[str] = set()
            for i in range(0, len(rows) if self.earlier_done else 0, _IN_CHUNK):
                keys = [r[0] for r in rows[i : i + _IN_CHUNK]]
                done.update(
                    r[0]
                    for r in self.db.execute(
                        "SELECT key FROM objects WHERE state = 1 AND key IN "
                        f"({','.join('?' * len(keys))})",
                        keys,
                    )
                )
        listed = Listed()
        for o in batch:
            if o.key in done:
                listed.done_files += 1
                listed.done_bytes += o.size
            else:
                listed.pending.append((o.key, o.size, o.etag, o.md5))
        return listed

    def any_done(self) -> bool:
        return (
            self.db.execute("SELECT 1 FROM objects WHERE state = 1 LIMIT 1").fetchone() is not None
        )

    def done(self, run: int) -> Iterator[tuple[str, int, str | None, str | None]]:
        last = ""
        while True:
            rows = self.db.execute(
                "SELECT key, size, md5, hash FROM objects WHERE seen = ? AND state = 1 AND key > ?"
                " ORDER BY key LIMIT 1000",
                (run, last),
            ).fetchall()
            if not rows:
                return
            yield from rows
            last = rows[-1][0]

    def mark_pending(self, key: str) -> None:
        """Copy ``key`` again from scratch: its finished blocks are forgotten too."""
        with self.transaction():
            self.db.execute("UPDATE objects SET state = 0, hash = NULL WHERE key = ?", (key,))
            self.db.execute("DELETE FROM blocks WHERE key = ?", (key,))

    def use_block_size(self, size: int) -> None:
        """Finished blocks are numbered in the block size that fetched them: under another
        size (or one an older manifest did not record) they no longer say which bytes are on
        disk, so they are forgotten and their files fetched whole again."""
        row = self.db.execute("SELECT v FROM meta WHERE k = 'block_size'").fetchone()
        if row is None or int(row[0]) != size:
            with self.transaction():
                self.db.execute("DELETE FROM blocks")
                self.db.execute("INSERT OR REPLACE INTO meta VALUES('block_size', ?)", (str(size),))

    def blocks_done(self, key: str, etag: str) -> set[int]:
        rows = self.db.execute("SELECT idx FROM blocks WHERE key = ? AND etag = ?", (key, etag))
        return {r[0] for r in rows}

    def block_done(self, key: str, etag: str, idx: int) -> None:
        self.db.execute("INSERT OR IGNORE INTO blocks VALUES(?, ?, ?)", (key, etag, idx))

    def object_done(self, key: str, digest: str | None, *, now: bool = False) -> None:
        """Queue ``key`` as done; ``flush`` commits the queue in one transaction (a commit per
        small file would cost more than copying it). A crash loses at most one queue: those
        files are copied again, whole and correct. ``now`` commits at once: for a file of many
        blocks, whose blocks were committed one by one, a lost mark would cost the whole file."""
        self._done.append((digest, key))
        if now or len(self._done) >= 512:
            self.flush()

    def flush(self) -> None:
        if not self._done:
            return
        with self.transaction():
            self.db.executemany("UPDATE objects SET state = 1, hash = ? WHERE key = ?", self._done)
            self.db.executemany("DELETE FROM blocks WHERE key = ?", [(k,) for _, k in self._done])
        self._done.clear()

    # ------------------------------------------------------------------ what the destination has
    def clear_present(self) -> None:
        """An empty temporary table ``present`` for the destination's listing (key, size,
        mtime, md5): what is already there, whoever copied it."""
        self.db.execute(
            "CREATE TEMP TABLE IF NOT EXISTS present("
            "key TEXT PRIMARY KEY, size INTEGER, mtime REAL, md5 TEXT)"
        )
        self.db.execute("DELETE FROM present")
        self.present = False

    def add_present(self, rows: list[tuple[str, int, float | None, str | None]]) -> None:
        with self.transaction():
            self.db.executemany("INSERT OR REPLACE INTO present VALUES(?, ?, ?, ?)", rows)

    def present_for(self, keys: list[str]) -> dict[str, tuple[int, float | None, str | None]]:
        """What the destination has of ``keys``: size, mtime, MD5 by key."""
        found: dict[str, tuple[int, float | None, str | None]] = {}
        for i in range(0, len(keys), _IN_CHUNK):
            chunk = keys[i : i + _IN_CHUNK]
            for key, size, mtime, md5 in self.db.execute(
                "SELECT key, size, mtime, md5 FROM present WHERE key IN "
                f"({','.join('?' * len(chunk))})",
                chunk,
            ):
                found[key] = (size, mtime, md5)
        return found

    def mark_present(self, keys: list[str]) -> None:
        """``keys`` are already at the destination, unchanged: done, with no hash of ours."""
        with self.transaction():
            self.db.executemany(
                "UPDATE objects SET state = 1, hash = NULL WHERE key = ?", [(k,) for k in keys]
            )

    def forget_unseen(self, run: int) -> Iterator[str]:
        """Keys that an earlier run copied but this run's listing no longer has."""
        last = ""
        while True:
            rows = self.db.execute(
                "SELECT key FROM objects WHERE seen < ? AND key > ? ORDER BY key LIMIT 1000",
                (run, last),
            ).fetchall()
            if not rows:
                return
            yield from (r[0] for r in rows)
            last = rows[-1][0]

    def drop(self, key: str) -> None:
        self.db.execute("DELETE FROM objects WHERE key = ?", (key,))

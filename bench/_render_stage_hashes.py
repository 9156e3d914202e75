"""The ``## stage hashes:`` section from bench/results/stage-hashes.json (bench/peer_hashes.py):
each tool's verdict on a blob whose Content-MD5 lies (import) and on the Content-MD5 it leaves
(export), and whether the stage benchmark's settings therefore compare like for like."""

from __future__ import annotations

BENCHMARKS = "the benchmark's"  # how peer_hashes.py names the settings the stage bench uses


def _table(rows: list[list[str]], sizes: list[str]) -> list[str]:
    lines = ["| tool, flags | " + " | ".join(sizes) + " |", "|---|" + "---|" * len(sizes)]
    for tool in dict.fromkeys(r[0] for r in rows):
        cells = [next(v for t, s, v in rows if t == tool and s == size) for size in sizes]
        lines.append(f"| {tool} | " + " | ".join(cells) + " |")
    return lines


def _as_benched(rows: list[list[str]]) -> list[list[str]]:
    return [r for r in rows if BENCHMARKS in r[0] or r[0].startswith("stoker")]


def render(doc: dict) -> str:
    r = doc["results"]
    v = r["versions"]
    checked = all(x[2].startswith("checked") for x in _as_benched(r["imports"]))
    right = all(x[2] == "Content-MD5 set, right" for x in _as_benched(r["exports"]))
    if checked and right:
        verdict = (
            "So every tool, as the stage benchmark runs it, checks MD5 on import (rclone too in "
            "its multi-thread downloads) and leaves a right Content-MD5 on export: the "
            "benchmark's MB/s and CPU seconds per GiB compare like for like."
        )
    else:
        verdict = (
            "**Not like for like**: as the stage benchmark runs them, not every tool checks MD5 "
            "on import or leaves a right Content-MD5 on export (the rows above say which)."
        )
    lines = [
        "## stage hashes: which hashes each tool really checks (a probe)",
        "",
        f"Measured {doc['measured']} against Azurite; {v.get('rclone', '?')}, "
        f"{v.get('azcopy', '?')}. Import: a blob whose Content-MD5 is another content's (Set "
        "Blob Properties); a tool that checks fails or drops the copy. Export: does the "
        "uploaded blob carry a Content-MD5, and is it right?",
        "",
        "### Import of a blob with a wrong Content-MD5",
        "",
        *_table(r["imports"], r["sizes"]),
        "",
        "### Export: the Content-MD5 the uploaded blob carries",
        "",
        *_table(r["exports"], r["export_sizes"]),
        "",
        verdict + " Where a 1 MiB upload carries a Content-MD5 without the tool asking, the "
        "emulator computed it (one Put Blob); a block upload carries one only when the tool sets "
        "it (AzCopy needs `--put-md5`).",
    ]
    return "\n".join(lines) + "\n"

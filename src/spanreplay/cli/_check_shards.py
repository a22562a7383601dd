"""``spanreplay check --shard I/N``: the runs one of N CI runners replays.

A run's shard is a function of its run id alone: the first 8 bytes of the
sha256 of the id, as a big-endian integer, modulo N, plus one. Not Python's
``hash()`` (salted per process) and not the run's position in the listing (which
depends on the files a runner reads and their order): every runner computes the
same split whatever subset of the source it reads, and a run two runners'
sources both hold lands on one of them. The id comes from a trace file and is
only hashed here, never used as a path or a name.

A sub-agent's run is replayed inside its parent's replay and never listed on its
own by ``check`` (see ``_check_select``), so it goes with its top-level run's
shard.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from spanreplay.model.events import RunSummary

from ._common import BadInput

__all__ = ["Shard", "parse_shard", "shard_of", "split_runs"]

# More shards than this is a typo, not a CI matrix; it also keeps the hash's bias
# (2**64 mod N) far below one run in a billion.
MAX_SHARDS: Final = 10_000
_SHAPE = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*", re.ASCII)


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``--shard I/N``: I from 1 to N, N from 1 to 10,000."""
    match = _SHAPE.fullmatch(text)
    if match is None:
        raise BadInput(
            f"--shard {text!r} is not I/N; write the runner's shard and the number of shards, "
            "e.g. --shard 2/4 on the second of four runners."
        )
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= count <= MAX_SHARDS:
        raise BadInput(
            f"--shard {text}: the number of shards must be from 1 to {MAX_SHARDS:,}; "
            "write e.g. --shard 1/4 for the first of four runners."
        )
    if not 1 <= index <= count:
        raise BadInput(
            f"--shard {text}: shards are numbered from 1 to {count}; write --shard 1/{count} for the first "
            f"runner and --shard {count}/{count} for the last."
        )
    return Shard(index, count)


def shard_of(run_id: str, count: int) -> int:
    """The shard (1 to ``count``) the run ``run_id`` goes to."""
    # surrogatepass: any str hashes, even one no trace format should have produced.
    digest = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def split_runs(runs: Sequence[RunSummary], shard: Shard) -> tuple[list[RunSummary], int]:
    """The runs of ``runs`` that go to ``shard``, in their order, and how many go to the others."""
    mine = [run for run in runs if shard_of(run.run_id, shard.count) == shard.index]
    return mine, len(runs) - len(mine)

"""One run read as a stream: checked in a first pass, its events given in seq order by later ones.

``load()`` holds every event of a run, which is what replay needs. What only
walks a run's steps once (``spanreplay show``) can hold far less: a first pass
over the run's spans checks what ``load()`` checks (payloads, one recording per
seq and call id, no step missing, no damaged line of the run) while keeping a few
machine words per step, and each walk of ``events()`` reads the spans again and
gives the events in seq order. Spans out of seq order wait in a small heap until
their turn; recorders write them in near seq order (a span ends before the one
that called it), so the heap stays small.

Anything out of the ordinary (a run that load() refuses, two ended copies of one
span, a trace another instrumentation recorded, stdin, a backend, Postgres) is
read by ``load()`` itself, whole, so its errors and its events are exactly load()'s.
"""

from __future__ import annotations

import heapq
import warnings
from array import array
from collections.abc import Callable, Iterable, Iterator
from itertools import pairwise
from typing import Final, Protocol, TypeVar

from spanreplay import semconv as sc
from spanreplay.errors import SpanReplayError
from spanreplay.model import codec
from spanreplay.model.events import Event, EventLog, RunInfo
from spanreplay.model.input_refs import InputRebuilder
from spanreplay.model.spans import SpanRecord
from spanreplay.readers import Damage, SpanReplayWarning

from .files import FileSource
from .registry import open_source
from .runlog import missing_seqs, only_run, warn_crashed

__all__ = ["RunStream", "stream_run"]

_T = TypeVar("_T")
# Bases of input references held per (kind, key) while streaming; older ones are read again.
_BASES_KEPT: Final = 8
# A seq past twice the steps seen so far plus this is not kept in the tables (load() reads such a run).
_SLACK: Final = 1 << 12
_MASK: Final = (1 << 64) - 1


class RunStream(Protocol):
    """One run, to walk step by step: its header, how many steps, and its events in seq order."""

    @property
    def run(self) -> RunInfo: ...

    def __len__(self) -> int: ...

    def events(self) -> Iterator[Event]:
        """The run's events in seq order, each verified as load() verifies it; may be walked again."""
        ...

    def by_seq(self, seq: int) -> Event | None: ...

    def seq_range(self) -> tuple[int, int]:
        """The first and the last seq of a run that has steps."""
        ...


class _Loaded:
    """A run load() read whole."""

    def __init__(self, log: EventLog) -> None:
        self._log = log

    @property
    def run(self) -> RunInfo:
        return self._log.run

    def __len__(self) -> int:
        return len(self._log)

    def events(self) -> Iterator[Event]:
        return iter(self._log)

    def by_seq(self, seq: int) -> Event | None:
        return self._log.by_seq(seq)

    def seq_range(self) -> tuple[int, int]:
        return self._log.events[0].seq, self._log.events[-1].seq


def stream_run(source: str, run_id: str | None, *, visit: Callable[[Event], None] | None = None) -> RunStream:
    """The run ``run_id`` of ``source`` (the only one when None), checked and ready to walk.

    ``visit`` sees every boundary event the check decodes (copies of a span included,
    inputs not yet rebuilt), for what can be learnt on the way, such as column widths.

    Raises:
        what load() raises for the run.
    """
    opened = open_source(source)
    if not isinstance(opened, FileSource):
        return _Loaded(opened.load(run_id))
    if run_id is None:
        run_id = only_run(opened.runs(), opened.name)
    streamed, failed, first = _quietly(lambda: _FileStream(opened, run_id, visit))
    _warn_again(first, ())
    if streamed is not None:
        return streamed
    if not isinstance(failed, _Unusual):
        raise failed
    # load() reads the same lines again: what the first pass warned of is said once.
    log, failed, second = _quietly(lambda: opened.load(run_id))
    _warn_again(second, {str(w.message) for w in first})
    if log is None:
        raise failed
    return _Loaded(log)


def _quietly(read: Callable[[], _T]) -> tuple[_T | None, Exception, list[warnings.WarningMessage]]:
    """What ``read`` returns or raises, and the warnings it gave, kept to be said once."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            return read(), _Unusual(), seen
        except (_Unusual, SpanReplayError) as exc:
            return None, exc, seen


def _warn_again(recorded: list[warnings.WarningMessage], said: Iterable[str]) -> None:
    """Show the warnings a read recorded, but those already said."""
    for w in recorded:
        if str(w.message) not in said:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


class _Unusual(Exception):
    """The first pass met what load() reads differently or refuses: load() reads the run."""


class _SeqTable:
    """The first pass's memory of a run's steps: three machine words per seq, none per copy.

    Per seq, the end time of the copy load() keeps (0: none; -1: a copy that never
    ended, a side effect's intent) and a hash of its span's key; per step, a hash of
    its call id. Whatever load() would refuse, or decide between copies in a way
    this cannot tell, raises ``_Unusual``.
    """

    def __init__(self) -> None:
        self.ends = array("q")
        self._keys = array("Q")
        self._calls = array("Q")

    def add(self, span: SpanRecord, event: Event) -> None:
        seq = event.seq
        if seq < 1 or seq > 2 * len(self._calls) + _SLACK:
            raise _Unusual
        if seq >= len(self.ends):
            grown = max(seq + 1, 2 * len(self.ends)) - len(self.ends)
            # frombytes: extend() would add one element per byte.
            self.ends.frombytes(bytes(8 * grown))
            self._keys.frombytes(bytes(8 * grown))
        held = self.ends[seq]
        end = span.end_ns if span.ended else -1
        key = hash(span.key) & _MASK or 1
        if held == 0:
            self.ends[seq] = end
            self._keys[seq] = key
            self._calls.append(hash(event.call_id) & _MASK)
        elif self._keys[seq] != key or (held > 0 and end > 0):
            raise _Unusual  # two spans at one seq, or two ended copies of one: load() tells which
        elif end > held:
            self.ends[seq] = end  # the ended copy of an intent replaces it

    def __len__(self) -> int:
        return len(self._calls)

    def calls_repeat(self) -> bool:
        """Whether two steps may share a call id (equal hashes: load() tells whether they do)."""
        return any(a == b for a, b in pairwise(sorted(self._calls)))

    def seqs(self) -> array[int]:
        return array("q", (seq for seq, end in enumerate(self.ends) if end))


class _FileStream:
    def __init__(self, source: FileSource, run_id: str, visit: Callable[[Event], None] | None) -> None:
        self._source = source
        self._run_id = run_id
        root: SpanRecord | None = None
        table = _SeqTable()
        damage: list[Damage] = []
        for span in self._spans(damage):
            if codec.is_run_span(span):
                if root is not None and root.key != span.key:
                    raise _Unusual
                if root is None or span.end_ns > root.end_ns:
                    root = span
            elif codec.is_boundary_span(span):
                try:
                    event = codec.span_to_event(span)
                except SpanReplayError:
                    raise _Unusual from None
                table.add(span, event)
                if visit is not None:
                    visit(event)
        if any(run_id in d.runs for d in damage) or not len(table) or table.calls_repeat():
            raise _Unusual
        self._ends = table.ends
        self._seqs = table.seqs()
        info = codec.span_to_run(root) if root is not None else RunInfo(run_id=run_id, status=sc.RUN_STATUS_CRASHED)
        missing = missing_seqs(info, self._seqs)
        if missing is not None:
            if info.status != sc.RUN_STATUS_CRASHED:
                raise _Unusual
            warn_crashed(run_id, missing[0])
        self._run = info

    @property
    def run(self) -> RunInfo:
        return self._run

    def __len__(self) -> int:
        return len(self._seqs)

    def seq_range(self) -> tuple[int, int]:
        return self._seqs[0], self._seqs[-1]

    def by_seq(self, seq: int) -> Event | None:
        if not 0 < seq < len(self._ends) or not self._ends[seq]:
            return None
        return next((e for e in self.events() if e.seq == seq), None)

    def events(self) -> Iterator[Event]:
        rebuilder = InputRebuilder(keep=_BASES_KEPT, fetch=self._raw_event)
        waiting: list[tuple[int, Event]] = []
        order = iter(self._seqs)
        due = next(order, None)
        for event in self._raw_events():
            heapq.heappush(waiting, (event.seq, event))
            while waiting and waiting[0][0] == due:
                yield rebuilder.rebuild(heapq.heappop(waiting)[1])
                due = next(order, None)

    def _raw_event(self, seq: int) -> Event | None:
        """The event at ``seq`` as recorded (its input not rebuilt), read again from the files."""
        return next((e for e in self._raw_events() if e.seq == seq), None)

    def _raw_events(self) -> Iterator[Event]:
        """The run's events in the order of the files, one per seq (the copy load() keeps)."""
        given = bytearray(len(self._ends))
        with warnings.catch_warnings():
            # Damaged lines of other runs were warned of by the first pass.
            warnings.simplefilter("ignore", SpanReplayWarning)
            for span in self._spans([]):
                if not codec.is_boundary_span(span):
                    continue
                seq = span.attributes.get(sc.SEQ)
                if not isinstance(seq, int) or not 0 < seq < len(self._ends) or given[seq]:
                    continue
                if (span.end_ns if span.ended else -1) != self._ends[seq]:
                    continue
                given[seq] = 1
                yield codec.span_to_event(span)

    def _spans(self, damage: list[Damage]) -> Iterator[SpanRecord]:
        return self._source.run_spans(self._run_id, damage)

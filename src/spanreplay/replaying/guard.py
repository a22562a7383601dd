"""The runtime guard: during a replay, notice the code that reads the clock or draws randomness directly.

``replay(..., guard=True)``. The lint reads the code; the guard watches it run,
so it also sees what the lint cannot: a clock read behind a helper of another
module, a ``getattr``, a library of the project's own. Each direct read in a
replayed run is a value the recording does not hold, which is how a replay
drifts from the recorded path; the guard names the file and line of each, once.

How it watches: a profile hook (``sys.setprofile``, and ``threading.setprofile``
for threads started during the run). Patching ``time.time`` would miss ``from
time import time`` done before the replay, and ``datetime.datetime.now`` cannot
be patched at all (a C type); a profile hook sees the call of the function
object itself, under whatever name the code reached it. Reads whose caller is
the standard library, an installed package (site-packages) or spanreplay are
not reported: they are not the project's code, and the hook checks that by the
calling code object, once per code object. The hook is off outside the run.

Left out on purpose: ``time.monotonic`` and ``time.perf_counter``, which
asyncio, OpenTelemetry and timing code read constantly and which rarely decide
anything (lint rule SR103 covers those that do), and calls on threads that
were already running when the replay started.
"""

from __future__ import annotations

import datetime as _datetime
import os
import random as _random
import sys
import sysconfig
import threading
import time as _time
import uuid as _uuid
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any, Final, TypeVar

from spanreplay.readers import SpanReplayWarning

__all__ = ["DeterminismWarning", "DirectCallGuard"]

T = TypeVar("T")


class DeterminismWarning(SpanReplayWarning):
    """Code in a replayed run read the clock or drew randomness directly, not through spanreplay."""


@dataclass(frozen=True)
class _Read:
    name: str
    what: str
    instead: str
    rule: str


_CLOCK_NOW: Final = ("read the clock directly", "spanreplay.now()", "SR101")
_CLOCK_TIME: Final = ("read the clock directly", "spanreplay.time()", "SR102")
_RANDOM: Final = ("drew from the random module", "spanreplay.random()", "SR201")
_UUID: Final = ("made a fresh id", "spanreplay.uuid4()", "SR202")
_URANDOM: Final = ("read the system's randomness", "a @spanreplay.tool function or a spanreplay.boundary()", "SR203")

# Functions written in C: the hook sees them as "c_call" with the function object.
_C_READS: Final[dict[Any, _Read]] = {
    _time.time: _Read("time.time", *_CLOCK_TIME),
    _time.time_ns: _Read("time.time_ns", *_CLOCK_TIME),
    _datetime.datetime.now: _Read("datetime.now", *_CLOCK_NOW),
    _datetime.datetime.utcnow: _Read("datetime.utcnow", *_CLOCK_NOW),
    _datetime.datetime.today: _Read("datetime.today", *_CLOCK_NOW),
    _datetime.date.today: _Read("date.today", *_CLOCK_NOW),
    os.urandom: _Read("os.urandom", *_URANDOM),
    # The random module's functions are methods of one hidden instance; these two are C.
    _random.random: _Read("random.random", *_RANDOM),
    _random.getrandbits: _Read("random.getrandbits", *_RANDOM),
}


def _python_reads() -> dict[CodeType, _Read]:
    """Functions written in Python, seen as "call" with their code object."""
    reads: dict[CodeType, _Read] = {
        _uuid.uuid4.__code__: _Read("uuid.uuid4", *_UUID),
        _uuid.uuid1.__code__: _Read("uuid.uuid1", *_UUID),
    }
    for name in _random.__all__:
        method = getattr(getattr(_random, name), "__func__", None)
        code = getattr(method, "__code__", None)
        if isinstance(code, CodeType) and name not in {"seed", "getstate", "setstate"}:
            reads[code] = _Read(f"random.{name}", *_RANDOM)
    return reads


_PY_READS: Final = _python_reads()
# The instance behind the random module's functions: a seeded random.Random(42) of the
# code's own runs the same methods and replays fine.
_MODULE_RANDOM: Final = getattr(_random, "_inst", None)


def _foreign_prefixes() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    folders = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    folders.add(os.path.dirname(os.path.abspath(__file__)))
    return (*(os.path.realpath(folder) + os.sep for folder in folders), *(folder + os.sep for folder in folders), "<")


_FOREIGN: Final = _foreign_prefixes()

_ProfileFunction = Callable[[FrameType, str, Any], object]
# The hooks of the guards in use, to tell one from a profiler's.
_HOOKS: Final[weakref.WeakSet[_ProfileFunction]] = weakref.WeakSet()


class DirectCallGuard:
    """Watches one replayed run for direct clock and random reads; warns once per call site when it ends."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.sites: dict[tuple[str, int], _Read] = {}
        self._own_code: dict[CodeType, bool] = {}
        # Non-empty while the run is on: a list, so the hook reads it as a closure cell, not an attribute.
        self._active: list[bool] = []
        self._installed = False
        self._previous: tuple[Any, Any] = (None, None)

    def start(self) -> bool:
        """Install the hook on this thread and on threads started from now on; False when it cannot."""
        current = sys.getprofile()
        if current is not None and current in _HOOKS:
            return False  # a guarded replay inside a guarded replay: the outer hook watches both
        if current is not None:
            # One profile function per thread: a profiler is running (cProfile, a debugger). Its
            # figures matter more than this check; say that the run goes unwatched.
            warnings.warn(
                f"The replay of run {self.run_id} is not guarded against direct clock and random reads: "
                "a profiler is running (sys.setprofile is taken). Run without the profiler to guard it.",
                DeterminismWarning,
                stacklevel=3,
            )
            return False
        self._previous = (sys.getprofile(), threading.getprofile())
        self._active.append(True)
        self._installed = True
        hook = self._make_hook()
        _HOOKS.add(hook)
        sys.setprofile(hook)
        threading.setprofile(hook)
        return True

    def stop(self) -> None:
        """Remove the hook; never raises. Threads started during the run drop it on their next call."""
        self._active.clear()
        if self._installed:
            self._installed = False
            sys.setprofile(self._previous[0])
            threading.setprofile(self._previous[1])

    def warn(self) -> None:
        """One DeterminismWarning per call site seen, pointing at the site."""
        sites, self.sites = self.sites, {}
        for (filename, line), read in sites.items():
            warnings.warn_explicit(
                f"{filename}:{line}: {read.name}() {read.what} during the replay of run {self.run_id}: the "
                f"value is not the recorded one, so the run can leave the recorded path here. Use "
                f"{read.instead} (lint rule {read.rule}).",
                DeterminismWarning,
                filename,
                line,
            )

    def _make_hook(self) -> _ProfileFunction:
        # A closure over locals, not a method: the hook runs on every call and return of the
        # replayed run, and each attribute lookup saved there is the guard's whole cost.
        c_reads, py_reads, seen, module_random, active = _C_READS, _PY_READS, self._seen, _MODULE_RANDOM, self._active

        def hook(frame: FrameType, event: str, arg: Any) -> None:
            if not active:
                sys.setprofile(None)  # a thread started during the run, still going after it
                return
            if event == "c_call":
                try:
                    read = c_reads.get(arg)
                except TypeError:  # an unhashable callable
                    return
                if read is not None:
                    seen(frame, read)
            elif event == "call":
                read = py_reads.get(frame.f_code)
                if read is not None and frame.f_back is not None:
                    if read.rule == "SR201" and frame.f_locals.get("self") is not module_random:
                        return
                    seen(frame.f_back, read)

        return hook

    def _seen(self, caller: FrameType, read: _Read) -> None:
        code = caller.f_code
        own = self._own_code.get(code)
        if own is None:
            own = self._own_code[code] = not code.co_filename.startswith(_FOREIGN)
        if own:
            self.sites.setdefault((code.co_filename, caller.f_lineno), read)

"""Replay hands a tool's output back with the types it had, nested too, or says why it cannot."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
import socket
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

import orjson
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay
from fixtures.backends import jaeger_trace, tempo_v2
from spanreplay import semconv as sc
from spanreplay.masking import MaskingConfig, mask
from spanreplay.model import payloads as _payloads
from spanreplay.model.typed_classes import REGISTRY
from spanreplay.readers import iter_spans

# --- the agent's types ---------------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    PAIR = (1, 2)


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Perm(enum.Flag):
    READ = 1
    WRITE = 2


class Point(NamedTuple):
    x: int
    y: int


@dataclasses.dataclass(frozen=True)
class Line:
    start: Point
    end: Point
    drawn: datetime
    color: Color


@dataclasses.dataclass
class Order:
    id: uuid.UUID
    total: Decimal
    placed: date
    lines: list[Line]
    tags: set[str]
    note: str | None = None
    computed: int = dataclasses.field(default=0, init=False)


class Customer(pydantic.BaseModel):
    name: str
    since: datetime
    level: Level
    orders: list[Order] = []


class Money:
    """A class of the agent's own that spanreplay cannot record without help."""

    def __init__(self, amount: Decimal, currency: str) -> None:
        self.amount = amount
        self.currency = currency

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and (self.amount, self.currency) == (other.amount, other.currency)

    __hash__ = None  # type: ignore[assignment]


WHEN = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
POINT = Point(1, 2)
LINE = Line(Point(0, 0), Point(3, 4), WHEN, Color.PAIR)


def an_order() -> Order:
    order = Order(uuid.UUID(int=7), Decimal("19.90"), date(2026, 3, 4), [LINE, LINE], {"b", "a"})
    order.computed = 5
    return order


# Every type the recording keeps, each as a tool output on its own.
VALUES: dict[str, Callable[[], Any]] = {
    "dataclass": an_order,
    "pydantic": lambda: Customer(name="Ada", since=WHEN, level=Level.HIGH, orders=[an_order()]),
    "namedtuple": lambda: POINT,
    "tuple": lambda: (1, "a", None, (2.5, True)),
    "set": lambda: {3, 1, 2},
    "frozenset": lambda: frozenset({"x", "y"}),
    "datetime": lambda: WHEN,
    "naive datetime": lambda: datetime(2026, 1, 1, 12),
    "datetime with an offset": lambda: datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=-5, minutes=-30))),
    "date": lambda: date(1999, 12, 31),
    "time": lambda: time(23, 59, 58, 7),
    "timedelta": lambda: timedelta(days=-3, seconds=5, microseconds=17),
    "decimal": lambda: Decimal("-0.000100"),
    "uuid": lambda: uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "enum": lambda: Color.RED,
    "enum with a tuple value": lambda: Color.PAIR,
    "int enum": lambda: Level.LOW,
    "flag": lambda: Perm.READ | Perm.WRITE,
    "bytes": lambda: b"\x00\xffbinary\n",
    "bytearray": lambda: bytearray(b"ab"),
    "path": lambda: Path("/tmp/reports/q1.csv"),
    "pure path": lambda: PurePosixPath("a/b"),
    "dict with int keys": lambda: {1: "one", 2: "two"},
    "dict with tuple keys": lambda: {(1, "a"): date(2020, 1, 1)},
}
USER_CLASSES = (Order, Line, Point, Customer, Color, Level, Perm)


class Work:
    """Counts real calls; once disarmed, a real call fails the test."""

    armed = True

    def enter(self) -> None:
        if not self.armed:
            pytest.fail("replay ran the real work")


WORK = Work()


@pytest.fixture(autouse=True)
def _isolated_registry() -> Iterator[None]:
    """Each test starts with no registered types, and leaves none behind."""
    saved = REGISTRY.snapshot()
    REGISTRY.restore(({}, {}))
    WORK.armed = True
    yield
    REGISTRY.restore(saved)


@spanreplay.tool
def produce(name: str) -> Any:
    WORK.enter()
    return VALUES[name]()


@spanreplay.tool
def produce_nested(name: str) -> Any:
    WORK.enter()
    value = VALUES[name]()
    return {"items": [value, {"inner": value}], "pair": (value, 1), "name": name}


@spanreplay.tool
def typed_order() -> Order:
    WORK.enter()
    return an_order()


@spanreplay.tool
def typed_customers() -> dict[str, list[Customer]]:
    WORK.enter()
    return {"vip": [Customer(name="Ada", since=WHEN, level=Level.HIGH, orders=[an_order()])]}


@spanreplay.tool
def typed_point_or_none(give: bool) -> Point | None:
    WORK.enter()
    return POINT if give else None


@spanreplay.tool
async def fetch_line() -> Line:
    WORK.enter()
    await asyncio.sleep(0)
    return LINE


@spanreplay.tool
async def fetch_any(name: str) -> Any:
    WORK.enter()
    await asyncio.sleep(0)
    return VALUES[name]()


def assert_same(replayed: Any, recorded: Any, where: str = "$") -> None:
    """Equal, and of the same type at every level (a dict is not a dataclass, a list not a tuple)."""
    assert type(replayed) is type(recorded), f"{where}: {type(replayed)} is not {type(recorded)}"
    assert replayed == recorded, where
    if isinstance(recorded, dict):
        keys = {key: key for key in replayed}
        for key, value in recorded.items():
            assert type(keys[key]) is type(key), f"{where} key {key!r}"
            assert_same(replayed[key], value, f"{where}[{key!r}]")
    elif isinstance(recorded, (list, tuple)):
        for index, (a, b) in enumerate(zip(replayed, recorded, strict=True)):
            assert_same(a, b, f"{where}[{index}]")
    elif isinstance(recorded, (set, frozenset)):
        for item in recorded:
            (twin,) = [other for other in replayed if other == item]
            assert_same(twin, item, f"{where}{{{item!r}}}")
    elif dataclasses.is_dataclass(recorded):
        for field in dataclasses.fields(recorded):
            assert_same(getattr(replayed, field.name), getattr(recorded, field.name), f"{where}.{field.name}")
    elif isinstance(recorded, pydantic.BaseModel):
        for name in type(recorded).model_fields:
            assert_same(getattr(replayed, name), getattr(recorded, name), f"{where}.{name}")


def record_and_replay(trace_dir: Path, agent: Callable[[], Any]) -> tuple[Any, Any]:
    with spanreplay.record(agent="types") as run:
        recorded = agent()
    WORK.armed = False
    with spanreplay.replay(trace_dir, run.run_id):
        replayed = agent()
    WORK.armed = True
    return recorded, replayed


def output_spans(exporter: InMemorySpanExporter) -> list[dict[str, Any]]:
    return [
        dict(span.attributes or {}) for span in exporter.get_finished_spans() if sc.CALL_ID in (span.attributes or {})
    ]


# --- each type, top level and nested ---------------------------------------------------------


@pytest.mark.parametrize("name", list(VALUES))
def test_each_type_comes_back_as_itself_from_a_tool_without_annotation(trace_dir: Path, name: str) -> None:
    for cls in USER_CLASSES:
        spanreplay.register_type(cls)
    recorded, replayed = record_and_replay(trace_dir, lambda: produce(name))
    assert_same(replayed, recorded)


@pytest.mark.parametrize("name", list(VALUES))
def test_each_type_comes_back_nested_in_dicts_lists_and_tuples(trace_dir: Path, name: str) -> None:
    for cls in USER_CLASSES:
        spanreplay.register_type(cls)
    recorded, replayed = record_and_replay(trace_dir, lambda: produce_nested(name))
    assert_same(replayed, recorded)


@pytest.mark.parametrize("name", ["set", "bytes", "datetime", "tuple", "uuid"])
def test_an_async_tool_returns_its_types_too(trace_dir: Path, name: str) -> None:
    recorded, replayed = record_and_replay(trace_dir, lambda: asyncio.run(fetch_any(name)))
    assert_same(replayed, recorded)


def test_the_return_annotation_lets_replay_build_the_classes_it_names_without_registering(trace_dir: Path) -> None:
    def agent() -> Any:
        return typed_order(), typed_customers(), typed_point_or_none(True), typed_point_or_none(False)

    recorded, replayed = record_and_replay(trace_dir, agent)
    assert_same(replayed, recorded)
    assert replayed[0].computed == 5  # a field the constructor does not take, set as recorded


def test_an_async_tool_with_an_annotation_returns_its_dataclass(trace_dir: Path) -> None:
    recorded, replayed = record_and_replay(trace_dir, lambda: asyncio.run(fetch_line()))
    assert_same(replayed, recorded)


@dataclasses.dataclass
class Stamp:
    on: date
    by: str


@dataclasses.dataclass
class Receipt:
    id: uuid.UUID
    total: Decimal
    when: datetime
    items: tuple[str, ...]
    tags: frozenset[str]
    color: Color
    stamps: list[Stamp]
    by_day: dict[int, Stamp]


@spanreplay.tool
def typed_receipts() -> list[Receipt]:
    WORK.enter()
    stamp = Stamp(date(2026, 1, 2), "ada")
    return [
        Receipt(uuid.UUID(int=9), Decimal("3.50"), WHEN, ("a", "b"), frozenset({"x"}), Color.RED, [stamp], {2: stamp})
    ]


@spanreplay.tool
def typed_customer() -> Customer | None:
    WORK.enter()
    return Customer(name="Ada", since=WHEN, level=Level.HIGH)


def test_the_annotation_alone_rebuilds_a_recording_made_before_type_tags(trace_dir: Path) -> None:
    """What earlier releases wrote: orjson's JSON of the value (enums by value), and no tags."""
    with spanreplay.record(agent="types") as run:
        recorded = (typed_receipts(), typed_customer())
    log = spanreplay.load(trace_dir, run.run_id)
    assert all(event.output_types is not None for event in log)
    untagged = spanreplay.EventLog(
        log.run,
        tuple(
            dataclasses.replace(event, output_json=_payloads.encode_output(value), output_types=None)
            for event, value in zip(log, recorded, strict=True)
        ),
    )
    WORK.armed = False
    with spanreplay.replay(untagged):
        replayed = (typed_receipts(), typed_customer())
    # Receipts, their stamps, the UUID, the Decimal, the tuple and the int keys: all from annotations.
    assert_same(replayed, recorded)


# --- what the span holds ---------------------------------------------------------------------


def test_a_plain_json_output_writes_no_type_attribute(trace_dir: Path, memory_exporter: InMemorySpanExporter) -> None:
    @spanreplay.tool
    def plain() -> dict[str, Any]:
        return {"a": [1, 2.5, "x", None, True, {"b": []}]}

    with spanreplay.record(agent="types"):
        plain()
    (span,) = output_spans(memory_exporter)
    assert not [name for name in span if name.startswith(sc.OUTPUT_TYPES)]


def test_the_output_stays_json_a_person_can_read(trace_dir: Path, memory_exporter: InMemorySpanExporter) -> None:
    with spanreplay.record(agent="types"):
        typed_order()
    (span,) = output_spans(memory_exporter)
    output = orjson.loads(span[sc.OUTPUT])
    assert output["id"] == "00000000-0000-0000-0000-000000000007"
    assert output["total"] == "19.90"
    assert output["placed"] == "2026-03-04"
    assert output["tags"] == ["a", "b"]
    assert output["lines"][0]["drawn"] == "2026-03-04T05:06:07.890123+00:00"
    assert output["lines"][0]["start"] == {"x": 0, "y": 0}
    assert output["lines"][0]["color"] == "PAIR"
    types = orjson.loads(span[sc.OUTPUT_TYPES])
    assert types["$"] == f"{__name__}:Order"
    assert types["lines[*].drawn"] == "datetime"  # one tag for every item of a list alike
    assert span[sc.OUTPUT_TYPES + sc.SIZE_SUFFIX] == len(span[sc.OUTPUT_TYPES].encode())


# --- register_type -------------------------------------------------------------------------------


def test_register_type_records_and_rebuilds_a_class_of_ones_own(trace_dir: Path) -> None:
    spanreplay.register_type(
        Money,
        encode=lambda m: {"amount": m.amount, "currency": m.currency},
        decode=lambda v: Money(v["amount"], v["currency"]),
    )

    @spanreplay.tool
    def price() -> Any:
        WORK.enter()
        return [Money(Decimal("9.99"), "EUR")]

    recorded, replayed = record_and_replay(trace_dir, price)
    assert replayed == recorded
    assert type(replayed[0].amount) is Decimal  # what encode returned kept its own types


def test_register_type_needs_functions_for_a_class_it_cannot_take_apart() -> None:
    with pytest.raises(spanreplay.ConfigurationError, match=r"register_type\(Money\) needs encode= and decode="):
        spanreplay.register_type(Money)
    with pytest.raises(spanreplay.ConfigurationError, match="only one of encode= and decode="):
        spanreplay.register_type(Money, encode=repr)


# --- failing closed --------------------------------------------------------------------------------


def test_a_class_neither_registered_nor_annotated_fails_closed_naming_the_step_and_register_type(
    trace_dir: Path,
) -> None:
    with spanreplay.record(agent="types") as run:
        produce("dataclass")
    WORK.armed = False
    with pytest.raises(spanreplay.UnservableOutputError) as info, spanreplay.replay(trace_dir, run.run_id):
        produce("dataclass")
    message = str(info.value)
    assert message.startswith(f"Run {run.run_id} seq 1 (tool 'produce'): the recorded output holds a {__name__}.Order")
    assert "spanreplay.register_type(Order)" in message
    assert (info.value.seq, info.value.key, info.value.path, info.value.reason) == (1, "produce", "$", "unregistered")


def test_a_trace_that_names_a_module_never_makes_replay_import_it(trace_dir: Path) -> None:
    with spanreplay.record(agent="types") as run:
        produce("datetime")
    log = spanreplay.load(trace_dir, run.run_id)
    event = log.events[0]
    hostile = dataclasses.replace(event, output_types=b'{"$":"antigravity:Fly"}')
    assert "antigravity" not in sys.modules
    WORK.armed = False
    with (
        pytest.raises(spanreplay.UnservableOutputError, match=r"antigravity\.Fly at \$"),
        spanreplay.replay(spanreplay.EventLog(log.run, (hostile,))),
    ):
        produce("datetime")
    assert "antigravity" not in sys.modules


def test_an_unknown_builtin_tag_asks_for_a_newer_release(trace_dir: Path) -> None:
    with spanreplay.record(agent="types") as run:
        produce("datetime")
    log = spanreplay.load(trace_dir, run.run_id)
    edited = dataclasses.replace(log.events[0], output_types=b'{"$":"quaternion"}')
    WORK.armed = False
    with (
        pytest.raises(spanreplay.UnservableOutputError, match=r"tagged 'quaternion' .* upgrade spanreplay"),
        spanreplay.replay(spanreplay.EventLog(log.run, (edited,))),
    ):
        produce("datetime")


@spanreplay.tool
def open_socket() -> dict[str, Any]:
    WORK.enter()
    return {"conn": socket.socket(), "note": "ok"}


def test_an_unencodable_value_is_logged_once_and_the_run_continues_with_the_real_value(
    trace_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="spanreplay")
    with spanreplay.record(agent="types") as run:
        first = open_socket()
        second = open_socket()
    for value in (first, second):
        assert isinstance(value["conn"], socket.socket)
        value["conn"].close()
    warnings = [r for r in caplog.records if "cannot record" in r.getMessage()]
    assert len(warnings) == 1
    assert "the socket.socket returned by tool 'open_socket' at conn" in warnings[0].getMessage()
    assert spanreplay.load(trace_dir, run.run_id).run.status == "ok"
    WORK.armed = False
    with pytest.raises(spanreplay.UnservableOutputError) as info, spanreplay.replay(trace_dir, run.run_id):
        open_socket()
    message = str(info.value)
    assert message.startswith(
        f"Run {run.run_id} seq 1 (tool 'open_socket'): the recording holds no usable value for this step: "
        "the tool returned a socket.socket at conn, which spanreplay could not record"
    )
    assert (info.value.reason, info.value.type_name, info.value.path) == ("unencodable", "socket.socket", "conn")


def test_a_recorded_error_of_a_typed_tool_is_raised_again(trace_dir: Path) -> None:
    @spanreplay.tool
    def broken() -> Order:
        WORK.enter()
        raise LookupError("no such order")

    with spanreplay.record(agent="types") as run, pytest.raises(LookupError):
        broken()
    WORK.armed = False
    with spanreplay.replay(trace_dir, run.run_id), pytest.raises(LookupError, match="no such order"):
        broken()


# --- masking ---------------------------------------------------------------------------------------


def test_a_masked_typed_value_comes_back_as_its_masked_text_and_its_siblings_keep_their_types(
    trace_dir: Path, provider: Any
) -> None:
    spanreplay.configure(
        trace_dir=trace_dir,
        tracer_provider=provider,
        raise_internal_errors=True,
        masking=MaskingConfig(rules=[mask("[1]")]),
    )

    @spanreplay.tool
    def stamps() -> list[datetime]:
        WORK.enter()
        return [WHEN, WHEN + timedelta(days=1), WHEN + timedelta(days=2)]

    recorded, replayed = record_and_replay(trace_dir, stamps)
    assert_same([replayed[0], replayed[2]], [recorded[0], recorded[2]])
    assert isinstance(replayed[1], str)
    assert replayed[1] != recorded[1].isoformat()


# --- every reader -------------------------------------------------------------------------------------


def _typed_run(trace_dir: Path) -> tuple[str, Any]:
    for cls in (Order, Line, Point, Color):
        spanreplay.register_type(cls)
    with spanreplay.record(agent="types", run_id="run_types") as run:
        recorded = (produce("dataclass"), big_mixed())
    return run.run_id, recorded


@spanreplay.tool
def big_mixed() -> Any:
    """Enough distinct typed values that the types attribute is written in chunks."""
    WORK.enter()
    return [{(i, "k"): uuid.UUID(int=i)} if i % 2 else (i, date(2020, 1, 1 + i % 28)) for i in range(150)]


def _replay_from(source: Any, run_id: str) -> Any:
    WORK.armed = False
    with spanreplay.replay(source, run_id):
        return produce("dataclass"), big_mixed()


def test_types_survive_the_trace_file_jaeger_and_tempo(trace_dir: Path, tmp_path: Path) -> None:
    run_id, recorded = _typed_run(trace_dir)
    spans = list(iter_spans(trace_dir))
    chunked = [s for s in spans if isinstance(s.attributes.get(sc.OUTPUT_TYPES), (list, tuple))]
    assert chunked, "the big output's types should be written in chunks"
    jaeger = tmp_path / "jaeger.json"
    jaeger.write_bytes(orjson.dumps({"data": [jaeger_trace(spans)]}))
    tempo = tmp_path / "tempo.json"
    tempo.write_bytes(orjson.dumps(tempo_v2(spans)))
    for source in (trace_dir, jaeger, tempo):
        assert_same(_replay_from(source, run_id), recorded)


def test_a_cut_types_attribute_is_caught_not_replayed(trace_dir: Path, tmp_path: Path) -> None:
    run_id, _ = _typed_run(trace_dir)
    tempo = tmp_path / "tempo.json"
    tempo.write_bytes(orjson.dumps(tempo_v2(list(iter_spans(trace_dir)), max_attribute_bytes=100)))
    with pytest.raises(spanreplay.PayloadIntegrityError):
        spanreplay.load(tempo, run_id)


# --- any nesting of these types ---------------------------------------------------------------------------

_hashables = st.recursive(
    st.one_of(
        st.integers(-(2**62), 2**62),
        st.text(max_size=8),
        st.dates(),
        st.uuids(),
        st.decimals(allow_nan=False, allow_infinity=False, places=3),
        st.sampled_from(list(Color) + list(Level)),
        st.binary(max_size=8),
    ),
    lambda inner: st.one_of(
        st.tuples(inner, inner),
        st.frozensets(inner, max_size=3),
        st.builds(Point, st.integers(-5, 5), st.integers(-5, 5)),
    ),
    max_leaves=6,
)
_leaves = st.one_of(
    _hashables,
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.datetimes(timezones=st.none() | st.just(UTC)),
    st.times(),
    st.timedeltas(),
    st.builds(Path, st.sampled_from(["/", "a/b", "/x y/z.txt"])),
)
_nested = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=6), inner, max_size=4),
        st.dictionaries(_hashables, inner, max_size=3),
        st.tuples(inner, inner),
        st.sets(_hashables, max_size=4),
        st.builds(
            lambda a, b: Line(Point(0, 1), Point(2, 3), WHEN, Color.RED) if a is None else {"line": b}, inner, inner
        ),
    ),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_nested)
def test_any_nesting_of_these_types_round_trips_equal_and_of_the_same_types(
    trace_dir: Path, provider: Any, value: Any
) -> None:
    # Masking off: a Decimal whose digits pass the Luhn check is a card number to the
    # detectors, and a masked value is served as its masked text (tested above).
    spanreplay.configure(trace_dir=trace_dir, tracer_provider=provider, raise_internal_errors=True, masking=False)
    for cls in USER_CLASSES:
        spanreplay.register_type(cls)

    @spanreplay.tool
    def give() -> Any:
        WORK.enter()
        return value

    recorded, replayed = record_and_replay(trace_dir, give)
    assert_same(replayed, recorded)


def test_types_survive_postgres(pg_dsn: str, tmp_path: Path, provider: Any) -> None:
    directory = tmp_path / "pg-traces"
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, postgres=pg_dsn)
    run_id, recorded = _typed_run(directory)
    from_postgres = spanreplay.load(pg_dsn, run_id)
    assert from_postgres == spanreplay.load(directory, run_id)
    assert [e.output_types for e in from_postgres] == [e.output_types for e in spanreplay.load(directory, run_id)]
    assert_same(_replay_from(pg_dsn, run_id), recorded)

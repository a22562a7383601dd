"""Replay compares inputs in their masked form, and masks only inputs that are not already it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from spanreplay.masking import MaskingConfig, transform


class Shout:
    """An idempotent transform (upper case) that counts the values it was given."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def __call__(self, value: Any) -> Any:
        self.seen.append(value)
        return value.upper() if isinstance(value, str) else value


def agent() -> str:
    # The first note is typed by the agent; the second is the (masked) output of the first step.
    first = spanreplay.boundary("tool", "note", {"note": "hello"}, lambda: {"note": "HELLO"})
    second = spanreplay.boundary("tool", "note", {"note": first["note"]}, lambda: {"note": "DONE"})
    return str(second["note"])


def _record(tmp_path: Path, provider: TracerProvider, shout: Shout) -> spanreplay.EventLog:
    directory = tmp_path / "traces"
    config = MaskingConfig(rules=[transform("note", shout, kind="tool", part="input")])
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, masking=config)
    with spanreplay.record(agent="notes") as run:
        assert agent() == "DONE"
    return spanreplay.load(directory, run.run_id)


def test_an_input_already_in_its_recorded_masked_form_is_served_without_masking_it_again(
    tmp_path: Path, provider: TracerProvider
) -> None:
    shout = Shout()
    log = _record(tmp_path, provider, shout)
    assert [e.input for e in log.events] == [{"note": "HELLO"}, {"note": "HELLO"}]
    shout.seen.clear()

    with spanreplay.replay(log) as replaying:
        assert agent() == "DONE"
    assert replaying.outcome == "completed"
    # The typed "hello" differs from the recording until masked; the second input is
    # the recorded output, already masked, and masking it again would change nothing.
    assert shout.seen == ["hello"]


def test_a_changed_input_is_masked_before_it_is_compared_and_shown(
    tmp_path: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPANREPLAY_MASK_KEY", "project-key")
    directory = tmp_path / "traces"
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)
    with spanreplay.record(agent="mail") as run:
        spanreplay.boundary("tool", "send", {"to": "ann@example.com"}, lambda: "sent")
    log = spanreplay.load(directory, run.run_id)

    with spanreplay.replay(log):
        # The same address, unmasked: it masks to the recorded token and is served.
        assert spanreplay.boundary("tool", "send", {"to": "ann@example.com"}, lambda: "live") == "sent"

    with (
        pytest.raises(spanreplay.InputChangedError) as caught,
        spanreplay.replay(log),
    ):
        spanreplay.boundary("tool", "send", {"to": "bob@example.com"}, lambda: "live")
    # The attempted side is shown masked: another token, never the address itself.
    assert "bob@example.com" not in str(caught.value)
    assert "ann@example.com" not in str(caught.value)

"""The support agent under test with spanreplay's pytest plugin: its recorded run replayed, offline.

The trace, traces/test_support/test_order_a17_is_on_its_way.jsonl, was recorded by
the first run of this test (against the local Messages API server). Every later run
replays it: no API call, no tool runs, the same clock reading and random draw::

    cd examples/support_agent
    pytest tests --spanreplay-mode=replay        # CI: a missing trace fails the test
    pytest tests --spanreplay-mode=rewrite       # record it again after an intended change
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

# agent.py sits in the folder above; run from anywhere.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import agent


@pytest.mark.spanreplay
def test_order_a17_is_on_its_way(spanreplay_run: object) -> None:
    reply = asyncio.run(agent.support("Where is my order A-17? I live in France."))
    assert "A-17" in reply
    assert "Lyon" in reply

"""A trip-planning agent: concurrent async tools, a flaky weather service, a clock-dependent branch.

Run it from the repository root; it records runs into ./traces until one fails:

    python examples/tool_agent/agent.py

Then replay the failed run, offline, with the same code:

    spanreplay replay traces/ RUN --entry examples.tool_agent.agent:main

``main()`` is the agent itself and what ``--entry`` names. It opens no run of its
own: recording wraps it in ``spanreplay.record()`` (below, in ``record_runs``),
replay wraps it in ``spanreplay.replay()``. The planning logic is plain Python
here so that the example needs no API key; a model call would be one more
boundary, recorded and replayed the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from datetime import date, timedelta
from typing import Any

import spanreplay

ORIGIN, DESTINATION = "BER", "LIS"
# The weather service drops about one connection in three: the failure to reproduce.
WEATHER_FAILURE_RATE = 0.35
# After this hour (UTC) there is no same-day departure worth offering.
LAST_DEPARTURE_HOUR = 18
# What spanreplay replay --entry names, run from the repository root.
ENTRY = "examples.tool_agent.agent:main"


async def _network_latency() -> None:
    # Random latency makes concurrent calls finish in a different order every run;
    # replay must not care. This is the real world, so plain random, not spanreplay's.
    await asyncio.sleep(random.uniform(0.001, 0.02))  # noqa: SR201


@spanreplay.tool
async def search_flights(origin: str, destination: str, day: str) -> list[dict[str, Any]]:
    """The airline's fare search."""
    await _network_latency()
    return [
        {"flight": "TP551", "departs": f"{day}T07:05", "price_eur": 189},
        {"flight": "LH1166", "departs": f"{day}T12:40", "price_eur": 142},
        {"flight": "FR144", "departs": f"{day}T19:15", "price_eur": 96},
    ]


@spanreplay.tool
async def get_forecast(city: str, day: str) -> dict[str, Any]:
    """The weather service: answers most of the time, drops the connection sometimes."""
    await _network_latency()
    if random.random() < WEATHER_FAILURE_RATE:
        raise ConnectionError(f"weather service closed the connection while fetching {city} on {day}")
    return {"city": city, "day": day, "rain_mm": 4 if city == DESTINATION else 0, "high_c": 21}


@spanreplay.tool
async def search_hotels(city: str, day: str) -> list[dict[str, Any]]:
    """The hotel search."""
    await _network_latency()
    return [{"hotel": "Casa do Rio", "night_eur": 88}, {"hotel": "Alfama Rooms", "night_eur": 71}]


@spanreplay.tool
def hold_seat(flight: str, passenger_ref: str) -> dict[str, Any]:
    """A 30-minute seat hold at the airline."""
    return {"hold": f"HOLD-{flight}-{passenger_ref[:8]}", "expires_in_min": 30}


async def main() -> dict[str, Any]:
    """Plan a trip from ORIGIN to DESTINATION and hold a seat; returns the plan.

    Raises:
        ConnectionError: when the weather service drops the connection (the
            agent has no retry, which is the bug a replay lets you study).
    """
    now = spanreplay.now()
    day: date = now.date() if now.hour < LAST_DEPARTURE_HOUR else now.date() + timedelta(days=1)
    # Both searches at once: they finish in any order, and replay does not mind.
    flights, hotels = await asyncio.gather(
        search_flights(ORIGIN, DESTINATION, day.isoformat()),
        search_hotels(DESTINATION, day.isoformat()),
    )
    forecast = await get_forecast(DESTINATION, day.isoformat())
    # Rain at the destination: arrive before the evening, even if it costs more.
    if forecast["rain_mm"] > 0:
        flights = [f for f in flights if f["departs"] < f"{day.isoformat()}T15:00"] or flights
    best = min(flights, key=lambda f: f["price_eur"])
    hotel = min(hotels, key=lambda h: h["night_eur"])
    hold = hold_seat(best["flight"], str(spanreplay.uuid4()))
    return {"day": day.isoformat(), "flight": best, "hotel": hotel, "forecast": forecast, "hold": hold}


async def _record_one() -> tuple[str, dict[str, Any] | None, BaseException | None]:
    run_id = ""
    try:
        async with spanreplay.record(agent="trip-planner") as run:
            run_id = run.run_id
            return run_id, await main(), None
    except ConnectionError as exc:  # the run span already holds it as the run's error
        return run_id, None, exc


def record_runs(max_runs: int) -> str | None:
    """Record runs until one fails (at most ``max_runs``); returns the failed run's id."""
    for _ in range(max_runs):
        run_id, plan, error = asyncio.run(_record_one())
        if error is not None:
            print(f"{run_id}  error  {type(error).__name__}: {error}")
            return run_id
        assert plan is not None
        print(f"{run_id}  ok     {plan['flight']['flight']} on {plan['day']}, {plan['hold']['hold']}")
    return None


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace-dir", default="traces", help="where the trace files go (default: traces)")
    parser.add_argument("--max-runs", type=int, default=50, help="stop after this many runs (default: 50)")
    parser.add_argument(
        "--weather-failure-rate",
        type=float,
        default=WEATHER_FAILURE_RATE,
        help=f"how often the weather service drops the connection (default: {WEATHER_FAILURE_RATE})",
    )
    args = parser.parse_args()
    WEATHER_FAILURE_RATE = args.weather_failure_rate
    spanreplay.configure(service_name="trip-planner", trace_dir=args.trace_dir)
    failed = record_runs(args.max_runs)
    if failed is None:
        print(f"No run failed in {args.max_runs} runs; run the script again.")
    else:
        print(f"\nReplay the failed run:\n  spanreplay replay {args.trace_dir}/ {failed} --entry {ENTRY}")

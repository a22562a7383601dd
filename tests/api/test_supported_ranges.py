"""The oldest set CI tests is the set of lower bounds pyproject.toml declares.

`.ci/job oldest` installs the project under `.ci/constraints-oldest.txt`; if a lower
bound moves in pyproject.toml without the constraints following, CI would test a
release no user is promised (or miss the one they are).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def _lower_bounds(extras: tuple[str, ...] = ()) -> dict[str, Version]:
    """The lower bounds of the core dependencies, or of the named extras' own requirements."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = [line for extra in extras for line in project["optional-dependencies"][extra]] or project["dependencies"]
    bounds: dict[str, Version] = {}
    for line in lines:
        requirement = Requirement(line)
        lows = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
        if lows:
            bounds[canonicalize_name(requirement.name)] = max(lows)
    return bounds


def _pins(name: str = "constraints-oldest.txt") -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for raw in (ROOT / ".ci" / name).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", f"{line!r}: the oldest set pins exact releases"
        pins[canonicalize_name(requirement.name)] = Version(specifier.version)
    return pins


def test_every_pin_of_the_oldest_set_is_a_declared_lower_bound() -> None:
    bounds, pins = _lower_bounds(), _pins()
    assert pins, "the oldest set is empty"
    for name, pinned in pins.items():
        assert name in bounds, f"{name} is pinned in the oldest set but has no lower bound in pyproject.toml"
        assert pinned == bounds[name], f"{name}: the oldest set pins {pinned}, pyproject.toml allows >= {bounds[name]}"


def test_the_ranges_that_matter_are_in_the_oldest_set() -> None:
    # The SDK spanreplay instruments and the OpenTelemetry packages its spans go through.
    required = {"anthropic", "opentelemetry-api", "opentelemetry-sdk", "opentelemetry-exporter-otlp"}
    assert required <= _pins().keys()


FRAMEWORK_EXTRAS = ("langchain", "mcp", "pydantic-ai", "frameworks-test")


def test_the_oldest_framework_set_is_the_framework_extras_lower_bounds() -> None:
    # `.ci/job frameworks-oldest` runs tests/frameworks on these: the low end of each adapter's range.
    bounds, pins = _lower_bounds(FRAMEWORK_EXTRAS), _pins("constraints-frameworks-oldest.txt")
    assert pins.keys() == bounds.keys(), "every framework extra's requirement is pinned at its lower bound"
    for name, pinned in pins.items():
        assert pinned == bounds[name], (
            f"{name}: the oldest framework set pins {pinned}, pyproject.toml allows >= {bounds[name]}"
        )

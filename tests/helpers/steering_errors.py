"""A project's own exceptions built on a test runner's or CLI toolkit's: the kind a trace names.

A common "skip when offline" helper subclasses ``unittest.SkipTest``, and a CLI
subclasses click's ``Exit`` or ``ClickException`` to pick its exit code. These
live outside the refused packages, so only their bases say what they steer.
"""

from __future__ import annotations

import unittest

import click


class NeedsNetwork(unittest.SkipTest):
    """Skips a test that needs the network (pytest skips on isinstance(exc, unittest.SkipTest))."""


class Done(click.exceptions.Exit):
    """Ends a click app with the exit code it holds."""


class Refused(click.ClickException):
    """A click error whose public ``exit_code`` a trace's fields could set to 0."""

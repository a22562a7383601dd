"""Instrumentation: the ``@tool`` decorator (and, per SDK, instrumentors)."""

"""Modules the tests share: local servers, receivers, recordings, samples and paths.

``tests/`` is on ``sys.path`` (``pythonpath`` in pyproject.toml), so a test
imports these as ``helpers.<module>``; test modules never import each other.
"""

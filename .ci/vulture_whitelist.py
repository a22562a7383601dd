"""Names vulture reports as unused that a protocol or framework uses.

vulture (``python -m vulture``, configured in pyproject.toml) reads this file with
src/: a name written here counts as used. Each one says which protocol needs it.
"""

# OpenTelemetry's SpanProcessor.on_start(span, parent_context=None): the SDK's
# multi-span processors pass the parent context by keyword, so every processor keeps
# the parameter's name though most never read it (recording/configuration.py,
# recording/keep.py, recording/exporters/_file.py and _otlp.py, recording/postgres/processor.py).
parent_context

"""The trace model: spans, the events of a run, their codec and payloads, typed values and error records.

The bottom layer: it knows span attribute names (``spanreplay.semconv``) and nothing of
masking, sources, prices, recording or replay."""

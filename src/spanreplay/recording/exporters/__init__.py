"""Exporters: the durable per-run trace file, OTLP without holding up the agent, others' spans masked."""

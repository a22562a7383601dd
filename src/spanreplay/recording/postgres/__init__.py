"""Writing runs to Postgres: one ``agent_steps`` row per boundary as it completes, imports, retention."""

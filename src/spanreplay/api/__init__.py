"""The public functions behind ``import spanreplay``: opening runs, loading sources, clock and random, checkpoints."""

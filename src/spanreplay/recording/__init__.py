"""Recording: the run that does the real work and writes each boundary as a span.

Its spans go to the durable trace file, OTLP and Postgres (``exporters``, ``postgres``), masked first;
``configuration`` is what ``spanreplay.configure()`` sets up. Nothing here knows replay."""

"""The run core: a run, its call-id scopes and branches, the settings it reads, and the boundary calls it takes.

Recording, replay and fork are kinds of run (``spanreplay.recording``, ``spanreplay.replaying``);
the code here knows none of them."""

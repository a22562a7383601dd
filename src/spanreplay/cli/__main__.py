"""``python -m spanreplay.cli``: the same as the ``spanreplay`` console script."""

from . import main

main()

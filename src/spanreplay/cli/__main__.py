"""``python -m spanreplay.cli``: the same as the ``spanreplay`` console script."""

from spanreplay.cli import main

main()

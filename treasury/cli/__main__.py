"""``python -m treasury.cli``."""

from . import main

main(prog_name="treasury")

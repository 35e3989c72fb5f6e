"""Reorgs: each pass, the blocks the service acted on (`treasury._records.marks`) are
compared with the canonical chain; a block that left it flags its marks for the
transfers and the deposits to act on."""

from .check import check_blocks

__all__ = ["check_blocks"]

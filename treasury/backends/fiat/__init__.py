from .base import FiatProvider

__all__ = ["FiatProvider"]

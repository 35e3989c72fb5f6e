from .base import Custody, CustodyKey

__all__ = ["Custody", "CustodyKey"]

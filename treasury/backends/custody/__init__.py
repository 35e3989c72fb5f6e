from .base import Custody, CustodyContext, CustodyKey

__all__ = ["Custody", "CustodyContext", "CustodyKey"]

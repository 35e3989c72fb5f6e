from .base import DuplicateKey, Storage, Transaction

__all__ = ["DuplicateKey", "Storage", "Transaction"]

"""ledger: dated entries in integer cents, with reports."""

from .book import Entry, Ledger, LedgerFull
from .config import load_config

__version__ = "0.7.3"
__all__ = ["Entry", "Ledger", "LedgerFull", "load_config"]

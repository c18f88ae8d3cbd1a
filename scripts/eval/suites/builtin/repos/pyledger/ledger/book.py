"""A ledger: dated entries with a category, kept in date order."""

from dataclasses import dataclass

from .config import load_config
from .money import fmt_amt, parse_amount


class LedgerFull(Exception):
    """Raised by Ledger.add when the ledger already holds `max_entries` entries."""


@dataclass(frozen=True)
class Entry:
    day: object  # a datetime.date
    amount: int  # cents; negative for money spent
    category: str
    note: str = ""

    def describe(self, currency="CHF"):
        return f"{self.day.isoformat()} {self.category}: {fmt_amt(self.amount, currency)}"


class Ledger:
    def __init__(self, config=None):
        self.config = load_config(config)
        self.entries = []

    def add(self, day, amount, category, note=""):
        """Add an entry; `amount` is cents or text such as '-12.50'."""
        if len(self.entries) >= self.config["max_entries"]:
            raise LedgerFull(f"the ledger holds {self.config['max_entries']} entries already")
        if isinstance(amount, str):
            amount = parse_amount(amount)
        entry = Entry(day, amount, category.strip().lower(), note)
        self.entries.append(entry)
        self.entries.sort(key=lambda e: e.day)
        return entry

    def balance(self):
        """The sum of all entries, in cents."""
        return sum(e.amount for e in self.entries)

    def entries_between(self, start, end):
        """The entries from day `start` to day `end`, both included."""
        return [e for e in self.entries if start <= e.day < end]

    def total_by_category(self):
        """{category: cents} over all entries."""
        totals = {}
        for e in self.entries:
            totals[e.category] = totals.get(e.category, 0) + e.amount
        return totals

    def categories(self):
        return sorted({e.category for e in self.entries})

    def describe(self):
        currency = self.config["currency"]
        return "\n".join(e.describe(currency) for e in self.entries)

"""Reading and writing a ledger as CSV: day,amount,category,note."""

import csv
from datetime import datetime

from .book import Ledger
from .money import fmt_amt

FIELDS = ["day", "amount", "category", "note"]


def load_csv(path, config=None):
    """A Ledger with the rows of the CSV file at `path` (the first line is the header)."""
    ledger = Ledger(config)
    date_format = ledger.config["date_format"]
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            day = datetime.strptime(row["day"], date_format).date()
            ledger.add(day, row["amount"], row["category"], row.get("note") or "")
    return ledger


def save_csv(ledger, path):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(FIELDS)
        for e in ledger.entries:
            amount = fmt_amt(e.amount, "").strip().replace(",", "")
            writer.writerow([e.day.strftime(ledger.config["date_format"]), amount, e.category, e.note])

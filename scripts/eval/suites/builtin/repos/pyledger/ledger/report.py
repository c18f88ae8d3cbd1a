"""Reports over a ledger: a summary, monthly totals, the largest entries, a text table."""

from .money import fmt_amt


def summary(ledger):
    """One line per category, then the balance."""
    currency = ledger.config["currency"]
    totals = ledger.total_by_category()
    lines = [f"{name}: {fmt_amt(totals[name], currency)}" for name in sorted(totals)]
    lines.append(f"balance: {fmt_amt(ledger.balance(), currency)}")
    return "\n".join(lines)


def _month(day):
    return f"{day.year:04d}-{day.month:02d}"


def _next_month(year, month):
    return (year + 1, 1) if month == 12 else (year, month + 1)


def monthly_totals(ledger):
    """{'2024-01': cents, ...} for every month from the first entry's to the last's
    (a month without entries is 0)."""
    first, last = ledger.entries[0].day, ledger.entries[-1].day
    totals = {}
    year, month = first.year, first.month
    while (year, month) <= (last.year, last.month):
        totals[f"{year:04d}-{month:02d}"] = 0
        year, month = _next_month(year, month)
    for e in ledger.entries:
        totals[_month(e.day)] += e.amount
    return totals


def largest(ledger, n=3):
    """The `n` entries with the largest amounts, largest first."""
    return sorted(ledger.entries, key=lambda e: e.amount, reverse=True)[:n]


def render_table(headers, rows):
    """A plain text table: columns as wide as their widest cell, numbers right-aligned."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]

    def line(cells):
        out = []
        for cell, width in zip(cells, widths):
            text = str(cell)
            out.append(text.rjust(width) if isinstance(cell, int) else text.ljust(width))
        return "  ".join(out).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule] + [line(r) for r in rows])

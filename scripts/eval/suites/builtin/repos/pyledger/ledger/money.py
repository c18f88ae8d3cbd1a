"""Amounts as integer cents: parsing, rounding and formatting."""

from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal

ROUNDING_MODES = {"half-even": ROUND_HALF_EVEN, "half-up": ROUND_HALF_UP}


def parse_amount(text):
    """'12.50', '-3.05' or '1,250' as cents (an int); more than two decimals is an error."""
    cleaned = text.strip().replace(",", "").replace("_", "")
    negative = cleaned.startswith("-")
    cleaned = cleaned.lstrip("+-")
    whole, _, frac = cleaned.partition(".")
    if not (whole or frac) or not (whole + frac).isdigit():
        raise ValueError(f"not an amount: {text!r}")
    if len(frac) > 2:
        raise ValueError(f"more than two decimal places: {text!r}")
    cents = int(whole or "0") * 100 + int(frac or "0")
    return -cents if negative else cents


def round_cents(value, mode="half-even"):
    """A float or Decimal amount of cents rounded to a whole cent by `mode`."""
    if mode not in ROUNDING_MODES:
        raise ValueError(f"unknown rounding mode: {mode}")
    return int(Decimal(str(value)).quantize(Decimal(1), rounding=ROUNDING_MODES[mode]))


def split_cents(cents, parts):
    """`cents` shared into `parts` amounts that differ by at most one cent and add up."""
    if parts < 1:
        raise ValueError("parts must be at least 1")
    base, extra = divmod(cents, parts)
    return [base + 1 if i < extra else base for i in range(parts)]


def fmt_amt(cents, currency="CHF"):
    """Cents as text with a thousands separator: 125000 -> '1,250.00 CHF'."""
    whole, frac = divmod(cents, 100)
    return f"{whole:,}.{frac:02d} {currency}"

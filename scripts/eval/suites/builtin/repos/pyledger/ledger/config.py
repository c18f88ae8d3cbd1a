"""Settings for a ledger: the defaults, and how overrides are laid over them."""

DEFAULTS = {
    "currency": "CHF",
    "decimal_places": 2,
    "max_entries": 2500,
    "rounding": "half-even",
    "date_format": "%Y-%m-%d",
}

SYMBOLS = {"CHF": "Fr.", "EUR": "€", "USD": "$", "GBP": "£"}


def load_config(overrides=None):
    """The defaults with `overrides` laid over them; an unknown key is an error."""
    config = dict(DEFAULTS)
    for key, value in (overrides or {}).items():
        if key not in DEFAULTS:
            raise KeyError(f"unknown setting: {key}")
        if value:
            config[key] = value
    return config


def currency_symbol(code):
    """The symbol printed for a currency code (the code itself when none is known)."""
    return SYMBOLS.get(code, code)

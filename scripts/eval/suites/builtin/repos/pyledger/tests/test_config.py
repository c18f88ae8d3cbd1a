import unittest

from ledger.config import DEFAULTS, currency_symbol, load_config


class ConfigTest(unittest.TestCase):
    def test_defaults(self):
        self.assertEqual(load_config(), DEFAULTS)

    def test_override(self):
        self.assertEqual(load_config({"currency": "EUR"})["currency"], "EUR")

    def test_falsy_overrides_are_kept(self):
        self.assertEqual(load_config({"decimal_places": 0})["decimal_places"], 0)
        self.assertEqual(load_config({"date_format": ""})["date_format"], "")

    def test_unknown_key(self):
        with self.assertRaises(KeyError):
            load_config({"colour": "blue"})

    def test_symbols(self):
        self.assertEqual(currency_symbol("GBP"), "£")
        self.assertEqual(currency_symbol("JPY"), "JPY")


if __name__ == "__main__":
    unittest.main()

import unittest
from decimal import Decimal

from ledger.money import fmt_amt, parse_amount, round_cents, split_cents


class ParseAmountTest(unittest.TestCase):
    def test_whole_and_cents(self):
        self.assertEqual(parse_amount("12.50"), 1250)
        self.assertEqual(parse_amount("0.07"), 7)
        self.assertEqual(parse_amount("1,250"), 125000)

    def test_one_decimal_means_tens_of_cents(self):
        self.assertEqual(parse_amount("12.5"), 1250)
        self.assertEqual(parse_amount("-0.3"), -30)

    def test_negative(self):
        self.assertEqual(parse_amount("-3.05"), -305)

    def test_rejects_garbage(self):
        for bad in ("", "-", "1.2.3", "abc", "1.234"):
            with self.assertRaises(ValueError, msg=bad):
                parse_amount(bad)


class RoundTest(unittest.TestCase):
    def test_half_even_is_the_default(self):
        self.assertEqual(round_cents(2.5), 2)
        self.assertEqual(round_cents(3.5), 4)
        self.assertEqual(round_cents(Decimal("2.5"), "half-up"), 3)

    def test_split_adds_up(self):
        self.assertEqual(split_cents(100, 3), [34, 33, 33])
        self.assertEqual(sum(split_cents(1001, 7)), 1001)

    def test_format_positive(self):
        self.assertEqual(fmt_amt(125000), "1,250.00 CHF")
        self.assertEqual(fmt_amt(7, "EUR"), "0.07 EUR")


class FormatNegativeTest(unittest.TestCase):
    def test_negative_amounts(self):
        self.assertEqual(fmt_amt(-305), "-3.05 CHF")
        self.assertEqual(fmt_amt(-5, "EUR"), "-0.05 EUR")
        self.assertEqual(fmt_amt(-125000), "-1,250.00 CHF")


if __name__ == "__main__":
    unittest.main()

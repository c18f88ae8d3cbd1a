import unittest
from datetime import date

from ledger import Ledger, LedgerFull


def sample():
    book = Ledger()
    book.add(date(2024, 3, 1), "5120.00", "Salary")
    book.add(date(2024, 3, 3), -185000, "rent")
    book.add(date(2024, 3, 9), "-48.20", "groceries ")
    book.add(date(2024, 3, 31), "-12.00", "groceries")
    return book


class LedgerTest(unittest.TestCase):
    def test_balance(self):
        self.assertEqual(sample().balance(), 512000 - 185000 - 4820 - 1200)

    def test_categories_are_normalised(self):
        self.assertEqual(sample().categories(), ["groceries", "rent", "salary"])

    def test_full(self):
        book = Ledger({"max_entries": 1})
        book.add(date(2024, 1, 1), 100, "x")
        with self.assertRaises(LedgerFull):
            book.add(date(2024, 1, 2), 100, "x")


class RangeTest(unittest.TestCase):
    def test_both_ends_included(self):
        got = sample().entries_between(date(2024, 3, 3), date(2024, 3, 9))
        self.assertEqual([e.amount for e in got], [-185000, -4820])

    def test_one_day(self):
        got = sample().entries_between(date(2024, 3, 31), date(2024, 3, 31))
        self.assertEqual([e.amount for e in got], [-1200])


if __name__ == "__main__":
    unittest.main()

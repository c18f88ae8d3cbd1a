import unittest
from datetime import date

from ledger import Ledger
from ledger.report import average_entry


class AverageTest(unittest.TestCase):
    def test_mean_in_cents(self):
        book = Ledger()
        for cents in (100, 200, 600):
            book.add(date(2024, 5, 1), cents, "x")
        self.assertEqual(average_entry(book), 300)

    def test_rounds_half_to_even(self):
        book = Ledger()
        book.add(date(2024, 5, 1), 1, "x")
        book.add(date(2024, 5, 2), 2, "x")
        self.assertEqual(average_entry(book), 2)  # 1.5 -> 2
        book.add(date(2024, 5, 3), 2, "x")
        book.add(date(2024, 5, 4), 0, "x")
        self.assertEqual(average_entry(book), 1)  # 5 / 4 = 1.25 -> 1

    def test_empty_ledger(self):
        self.assertEqual(average_entry(Ledger()), 0)


if __name__ == "__main__":
    unittest.main()

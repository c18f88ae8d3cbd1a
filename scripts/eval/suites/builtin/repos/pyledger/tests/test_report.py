import unittest
from datetime import date

from ledger import Ledger
from ledger.report import largest, monthly_totals, render_table, summary


def sample():
    book = Ledger()
    book.add(date(2024, 1, 1), 300000, "salary")
    book.add(date(2024, 1, 5), 25050, "gift")
    book.add(date(2024, 3, 2), 120000, "salary")
    return book


class SummaryTest(unittest.TestCase):
    def test_summary(self):
        self.assertEqual(summary(sample()), "gift: 250.50 CHF\nsalary: 4,200.00 CHF\nbalance: 4,450.50 CHF")

    def test_largest(self):
        self.assertEqual([e.amount for e in largest(sample(), 2)], [300000, 120000])

    def test_table(self):
        table = render_table(["name", "n"], [["a", 10], ["bcd", 7]])
        self.assertEqual(table.splitlines(), ["name  n", "----  --", "a     10", "bcd    7"])


class MonthlyTotalsTest(unittest.TestCase):
    def test_gaps_are_zero(self):
        self.assertEqual(monthly_totals(sample()), {"2024-01": 325050, "2024-02": 0, "2024-03": 120000})

    def test_empty_ledger(self):
        self.assertEqual(monthly_totals(Ledger()), {})


if __name__ == "__main__":
    unittest.main()

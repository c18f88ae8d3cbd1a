#!/bin/sh
# Runs every tests/test_*.sh; the exit status is the number of test files that failed.
cd "$(dirname "$0")" || exit 1
failed=0
for t in test_*.sh; do
    sh "$t" || failed=$((failed + 1))
done
[ "$failed" -eq 0 ] && echo "all tests passed" || echo "$failed test file(s) failed"
exit "$failed"

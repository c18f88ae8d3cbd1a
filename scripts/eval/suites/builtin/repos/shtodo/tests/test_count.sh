#!/bin/sh
. "$(dirname "$0")/lib.sh"

assert_eq "count without a list" "0" "$(sh "$todo" count)"
sh "$todo" add one
sh "$todo" add two
sh "$todo" add three
sh "$todo" done 1
assert_eq "count shows the open items" "2" "$(sh "$todo" count)"
sh "$todo" done 3
assert_eq "count after another done" "1" "$(sh "$todo" count)"
finish

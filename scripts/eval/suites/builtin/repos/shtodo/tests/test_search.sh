#!/bin/sh
. "$(dirname "$0")/lib.sh"

TODO_FILE="$work/my lists/home list.txt"
sh "$todo" add buy milk
sh "$todo" add fix the bike
sh "$todo" add milk the cow
assert_eq "search" "1:buy milk
3:milk the cow" "$(sh "$todo" search milk 2>&1)"
assert_eq "no match" "" "$(sh "$todo" search tea 2>&1)"
finish

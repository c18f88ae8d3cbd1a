#!/bin/sh
. "$(dirname "$0")/lib.sh"

sh "$todo" add xray the suitcase
sh "$todo" add buy milk
sh "$todo" add post the letter
sh "$todo" done 2
sh "$todo" clear
assert_eq "only the done item is gone" "xray the suitcase
post the letter" "$(cat "$TODO_FILE")"
finish

#!/bin/sh
. "$(dirname "$0")/lib.sh"

touch notes.txt plan.txt
sh "$todo" add "review *.txt"
sh "$todo" add "keep  two spaces"
sh "$todo" add -n
assert_eq "items are stored as typed" "review *.txt
keep  two spaces
-n" "$(cat "$TODO_FILE")"
finish

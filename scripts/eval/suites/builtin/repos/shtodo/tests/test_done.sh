#!/bin/sh
. "$(dirname "$0")/lib.sh"

sh "$todo" add wash the car
sh "$todo" add water the plants
sh "$todo" add pay rent
sh "$todo" done 2
assert_eq "item 2 is done" "[x] water the plants" "$(sed -n 2p "$TODO_FILE")"
assert_status "an item that does not exist" 1 sh "$todo" done 7
assert_status "a word for a number" 64 sh "$todo" done two
assert_status "an empty number" 64 sh "$todo" done ""
msg=$(sh "$todo" done "" 2>&1)
case $msg in
    *"not an item number"*) ;;
    *) fail "an empty number is named: got [$msg]" ;;
esac
finish

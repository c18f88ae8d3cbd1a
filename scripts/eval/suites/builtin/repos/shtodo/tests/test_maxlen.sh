#!/bin/sh
. "$(dirname "$0")/lib.sh"

assert_status "72 characters fit by default" 0 sh "$todo" add "$(printf '%072d' 0)"
assert_status "73 do not" 1 sh "$todo" add "$(printf '%073d' 0)"
TODO_MAX_LEN=10
export TODO_MAX_LEN
assert_status "the environment sets the limit" 1 sh "$todo" add "eleven char"
assert_status "ten fit" 0 sh "$todo" add "ten chars!"
finish

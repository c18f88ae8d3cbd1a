#!/bin/sh
. "$(dirname "$0")/lib.sh"

assert_eq "an empty list" "" "$(sh "$todo" list)"
sh "$todo" add buy milk
sh "$todo" add call the plumber
assert_eq "list" "  1  buy milk
  2  call the plumber" "$(sh "$todo" list)"
assert_status "an unknown command" 64 sh "$todo" frobnicate
assert_status "add without text" 64 sh "$todo" add
long=$(printf '%080d' 0)
assert_status "a text over the limit" 1 sh "$todo" add "$long"
assert_eq "help" "usage: todo.sh COMMAND [ARGS]" "$(sh "$todo" help | head -n 1)"
finish

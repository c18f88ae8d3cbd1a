#!/bin/sh
# todo.sh: a to-do list in a plain text file, one item per line.
set -u

here=$(dirname "$0")
. "$here/todo.conf"
. "$here/lib/common.sh"

usage() {
    cat <<USAGE
usage: todo.sh COMMAND [ARGS]
  add TEXT     add an item
  list         list the items, numbered
  done N       mark item N as done
  search WORD  the items containing WORD
  clear        remove the items marked done
USAGE
}

cmd_add() {
    [ $# -gt 0 ] || die_usage "add needs the item's text"
    item=$*
    check_length "$item" || die "the item is longer than $MAX_LEN characters"
    ensure_dir "$TODO_FILE"
    echo $item >> "$TODO_FILE"
}

cmd_list() {
    [ -f "$TODO_FILE" ] || return 0
    n=0
    while IFS= read -r line; do
        n=$((n + 1))
        printf '%3d  %s\n' "$n" "$line"
    done < "$TODO_FILE"
}

cmd_done() {
    [ $# -eq 1 ] || die_usage "done needs one item number"
    is_number "$1" || die_usage "not an item number: $1"
    total=$(count_lines "$TODO_FILE")
    { [ "$1" -ge 1 ] && [ "$1" -le "$total" ]; } || die "there is no item $1 (there are $total)"
    awk -v n="$1" -v mark="$DONE_MARK" 'NR == n && index($0, mark) != 1 { $0 = mark " " $0 } { print }' \
        "$TODO_FILE" > "$TODO_FILE.tmp" && mv "$TODO_FILE.tmp" "$TODO_FILE"
}

cmd_search() {
    [ $# -eq 1 ] || die_usage "search needs one word"
    [ -f "$TODO_FILE" ] || return 0
    grep -n -F -- "$1" $TODO_FILE || true
}

cmd_clear() {
    [ -f "$TODO_FILE" ] || return 0
    grep -v "^$DONE_MARK" "$TODO_FILE" > "$TODO_FILE.tmp"
    mv "$TODO_FILE.tmp" "$TODO_FILE"
}

command=${1:-help}
[ $# -gt 0 ] && shift
case $command in
    add) cmd_add "$@" ;;
    list) cmd_list ;;
    done) cmd_done "$@" ;;
    search) cmd_search "$@" ;;
    clear) cmd_clear ;;
    help | -h | --help) usage ;;
    *) die_usage "unknown command: $command" ;;
esac

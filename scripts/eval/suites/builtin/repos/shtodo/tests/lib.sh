# Sourced by each test: a fresh folder and list per test, and a few assertions.
root=$(cd "$(dirname "$0")/.." && pwd)
todo="$root/todo.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
TODO_FILE="$work/list.txt"
export TODO_FILE
failures=0

fail() {
    printf 'FAIL %s: %s\n' "$(basename "$0")" "$*" >&2
    failures=$((failures + 1))
}

assert_eq() {
    # assert_eq WHAT EXPECTED ACTUAL
    [ "$2" = "$3" ] || fail "$1: expected [$2], got [$3]"
}

assert_status() {
    # assert_status WHAT EXPECTED_STATUS COMMAND...
    what=$1 expected=$2
    shift 2
    "$@" >/dev/null 2>&1
    got=$?
    [ "$got" = "$expected" ] || fail "$what: expected exit status $expected, got $got"
}

finish() {
    [ "$failures" -eq 0 ] && printf 'ok %s\n' "$(basename "$0")"
    exit "$failures"
}

# Helpers shared by todo.sh (sourced, never run).

die() {
    printf 'todo: %s\n' "$*" >&2
    exit 1
}

die_usage() {
    printf 'todo: %s (try: todo.sh help)\n' "$*" >&2
    exit "$USAGE_STATUS"
}

is_number() {
    case $1 in
        *[!0-9]*) return 1 ;;
    esac
    return 0
}

check_length() {
    # true when the text $1 is at most MAX_LEN characters long
    [ "${#1}" -le "$MAX_LEN" ]
}

count_lines() {
    # the number of lines in the file $1, 0 when there is no such file
    if [ -f "$1" ]; then
        wc -l < "$1" | tr -d ' '
    else
        echo 0
    fi
}

ensure_dir() {
    # create the folder that holds the file $1
    dir=$(dirname "$1")
    [ -d "$dir" ] || mkdir -p "$dir" || die "cannot create $dir"
}

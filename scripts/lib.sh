# Shared by the ensure-*.sh scripts (sourced, POSIX sh): one-line failures and apt-get installs that
# wait for the package manager's locks and retry once, because CI machines run other apt-get jobs.

# fail WHAT WHY: the one line a script ends with when it cannot provide what the tests need.
fail() {
    echo "$(basename "$0"): needs $1: $2" >&2
    exit 1
}

_sudo() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# apt_run ARGS...: apt-get waiting up to 10 min for the dpkg lock; a failure is tried once more after
# 20 s (the lists lock, a mirror's passing error); output goes to a log shown only when both fail.
apt_run() {
    log=$(mktemp)
    for try in 1 2; do
        if _sudo env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 "$@" >"$log" 2>&1; then
            rm -f "$log"
            return 0
        fi
        [ "$try" = 1 ] && sleep 20
    done
    tail -5 "$log" >&2
    rm -f "$log"
    return 1
}

# apt_install PKG...: apt-get update, then install PKG... (no recommends).
apt_install() {
    apt_run update && apt_run install -y --no-install-recommends "$@"
}

# apt_install_first PKG...: the first of several alternatives the distribution has (e.g. JDK 17, then 21).
apt_install_first() {
    apt_run update || return 1
    for pkg in "$@"; do
        if apt_run install -y --no-install-recommends "$pkg"; then
            return 0
        fi
    done
    return 1
}

# java_major CMD: the feature version of a java or javac ("17" for 17.0.15, "8" for 1.8.0).
java_major() {
    "$1" -version 2>&1 | sed -n 's/.*version "\([0-9][0-9.]*\).*/\1/p; s/^javac \([0-9][0-9.]*\).*/\1/p' \
        | sed -n 1p | awk -F. '{ if ($1 == 1) print $2; else print $1 }'
}

# need_java TOOL WHAT PKG...: TOOL (java or javac; from JAVA_HOME when it is set) at version 17 or
# newer, installing the first of PKG... the distribution has when it is missing; sets JAVA_CMD.
need_java() {
    tool="$1"
    what="$2"
    shift 2
    JAVA_CMD="$tool"
    [ -n "${JAVA_HOME:-}" ] && JAVA_CMD="$JAVA_HOME/bin/$tool"
    if ! command -v "$JAVA_CMD" >/dev/null 2>&1; then
        apt_install_first "$@" || fail "$what" "apt-get could not install any of: $*"
    fi
    major=$(java_major "$JAVA_CMD")
    [ -n "$major" ] && [ "$major" -ge 17 ] \
        || fail "$what" "$JAVA_CMD is version ${major:-unknown} (set JAVA_HOME to a JDK 17 or newer)"
}

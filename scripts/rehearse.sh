#!/bin/sh
# The fresh-machine rehearsal: clone HEAD into a temporary directory and run the README's test command
# there (what .ci/run runs, with CI=true) with every cache empty: HOME (so ~/.m2, ~/.npm, ~/.cache and
# the project's own caches under it), pip's, Go's and the container engine's image store. Run it before
# saying an issue is resolved; it prints each tox environment's counts and the minutes it took.
#
#   sh scripts/rehearse.sh [--keep]      (--keep leaves the temporary directory for a look afterwards)
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
keep=""
[ "${1:-}" = "--keep" ] && keep=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rmqtx-rehearsal-XXXXXX")
[ -n "$keep" ] || trap 'rm -rf "$tmp"' EXIT
echo "rehearsal in $tmp: clone of $(git -C "$repo" rev-parse --short HEAD)"
git clone -q --no-hardlinks "$repo" "$tmp/rmqtx"

home="$tmp/home"
mkdir -p "$home" "$tmp/containers/storage" "$tmp/containers/run"
# the image store (root's is /var/lib/containers whatever HOME says): a fresh one, same driver
cat >"$tmp/containers/storage.conf" <<CONF
[storage]
driver = "overlay"
graphroot = "$tmp/containers/storage"
runroot = "$tmp/containers/run"
CONF

started=$(date +%s)
status=0
(
    cd "$tmp/rmqtx"
    env -u GOPATH -u GOMODCACHE -u GOCACHE -u XDG_CACHE_HOME -u RMQTX_BENCH_CACHE -u MAVEN_OPTS -u MAVEN_ARGS \
        -u PIP_CACHE_DIR -u npm_config_cache -u NPM_CONFIG_CACHE -u RMQTX_FIXTURES -u VIRTUAL_ENV \
        HOME="$home" PIP_NO_CACHE_DIR=1 CONTAINERS_STORAGE_CONF="$tmp/containers/storage.conf" CI=true \
        bash .ci/run
) >"$tmp/run.log" 2>&1 || status=$?
minutes=$(( ($(date +%s) - started + 59) / 60 ))

echo "--- per environment (from $tmp/run.log)"
grep -E "^[0-9]+ (passed|failed)|^(FAILED|PASSED) \(|^Ran [0-9]+ tests|^strict run failed|^  (pytest|trial|pure|types): |^ERROR: |^  congratulations" \
    "$tmp/run.log" || true
echo "--- exit status $status after $minutes min"
if [ "$status" != 0 ]; then
    tail -40 "$tmp/run.log"
    [ -n "$keep" ] || cp "$tmp/run.log" "${TMPDIR:-/tmp}/rmqtx-rehearsal-failed.log" && echo "log kept in ${TMPDIR:-/tmp}/rmqtx-rehearsal-failed.log"
fi
exit "$status"

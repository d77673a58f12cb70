#!/bin/sh
# The 5.x Python SDK (rocketmq-python-client, PyPI) in its own venv, interop/py5/.venv: its top-level
# module `rocketmq` clashes with the C++ client's PyPI `rocketmq`. The py5 interop column and
# tests/grpc run it; the broker's gRPC endpoint loads the SDK's generated protobuf classes from it
# ($RMQTX_GRPC_STUBS). Idempotent: quick when the venv already has the pinned version.
set -eu
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")/.." && pwd)
venv="${RMQTX_PY5_VENV:-$here/interop/py5/.venv}"
version="5.1.2"
python="${PYTHON:-python3}"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('rocketmq-python-client') != '$version')" 2>/dev/null; then
    echo "py5 venv ready: rocketmq-python-client $version in $venv"
    exit 0
fi
"$python" -m venv "$venv" || fail "a Python venv for the 5.x SDK" "$python -m venv $venv failed"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "rocketmq-python-client==$version" \
    || fail "rocketmq-python-client $version" "pip could not install it into $venv"
echo "py5 venv made: rocketmq-python-client $version in $venv"

"""The generated protobuf classes of apache/rocketmq-apis, taken from the official Python SDK.

``rocketmq-python-client`` (PyPI) ships them as ``rocketmq.grpc_protocol``, but its top-level
``rocketmq`` package clashes with the C++ client's, so the SDK usually lives in its own venv. We
load only the generated modules, by file, under private names, and never import ``rocketmq``.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import sys
from types import ModuleType

_PACKAGE = os.path.join("rocketmq", "grpc_protocol")
_PRIVATE = "rmqtx.grpc._generated"
_SDK_IMPORT = "from rocketmq.grpc_protocol import"


class StubsMissing(RuntimeError):
    """Neither ``$RMQTX_GRPC_STUBS`` nor ``sys.path`` has ``rocketmq/grpc_protocol``."""


def _candidates() -> list[str]:
    """Where to look: ``$RMQTX_GRPC_STUBS`` (a site-packages dir or a venv), then ``sys.path``."""
    out: list[str] = []
    for root in filter(None, os.environ.get("RMQTX_GRPC_STUBS", "").split(os.pathsep)):
        out.append(root)
        out.extend(sorted(glob.glob(os.path.join(root, "lib", "python3*", "site-packages"))))
    out.extend(p for p in sys.path if p)
    return out


def find_stubs_dir() -> str:
    for root in _candidates():
        path = os.path.join(root, _PACKAGE)
        if os.path.isfile(os.path.join(path, "service_pb2.py")):
            return path
    raise StubsMissing(
        "the gRPC endpoint needs the generated classes of rocketmq-python-client: "
        "pip install rocketmq-python-client (into this env, or into a venv named by $RMQTX_GRPC_STUBS)"
    )


def _load(directory: str, name: str) -> ModuleType:
    full = f"{_PRIVATE}.{name}"
    if full in sys.modules:
        return sys.modules[full]
    path = os.path.join(directory, f"{name}.py")
    with open(path, encoding="utf-8") as handle:
        source = handle.read().replace(_SDK_IMPORT, f"from {_PRIVATE} import")
    spec = importlib.util.spec_from_loader(full, loader=None, origin=path)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__file__ = path
    sys.modules[full] = module
    try:
        exec(compile(source, path, "exec"), module.__dict__)
    except BaseException:
        del sys.modules[full]
        raise
    setattr(sys.modules[_PRIVATE], name, module)
    return module


def load() -> tuple[ModuleType, ModuleType, ModuleType]:
    """(definition_pb2, service_pb2, service_pb2_grpc)."""
    if _PRIVATE not in sys.modules:
        package = ModuleType(_PRIVATE)
        package.__path__ = []
        sys.modules[_PRIVATE] = package
    directory = find_stubs_dir()
    return _load(directory, "definition_pb2"), _load(directory, "service_pb2"), _load(directory, "service_pb2_grpc")

"""One driver per client (``base.Driver``'s subclasses, one module each); ``all_drivers`` lists the columns.

The drivers import ``interop.drivers.base``, never this package's ``__init__``: it imports them all.
"""

from __future__ import annotations

from interop.drivers.base import Driver


def all_drivers() -> dict[str, Driver]:
    """Every column, in table order."""
    from interop.drivers.cpp import CppDriver
    from interop.drivers.go import GoDriver
    from interop.drivers.java import Java5Driver, JavaDriver
    from interop.drivers.node import NodeDriver
    from interop.drivers.py5 import Go5Driver, Java5GrpcDriver, Node5Driver, Py5Driver
    from interop.drivers.python import PythonDriver

    return {d.name: d for d in (JavaDriver(), Java5Driver(), GoDriver(), CppDriver(), NodeDriver(), PythonDriver(), Py5Driver(),
                                   Java5GrpcDriver(), Node5Driver(), Go5Driver())}

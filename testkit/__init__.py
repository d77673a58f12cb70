"""Support shared by tests/, benchmarks/ and interop/: free ports (``ports``), processes owned by a run
(``procs``), the standalone and HA-cluster harnesses (``standalone``, ``ha``), the gRPC py5 helpers and
load (``py5``, ``grpc_load``), the broker hot path in one process (``hotpath``), the Apache 4.9.8 Java
side (``java``: jars, JVM options, a Java broker) and Apache 5.4.0's proxy (``apache5``).

Nothing here is shipped: the wheel holds rmqtx/ and twisted/plugins only. It imports rmqtx and never
tests/, benchmarks/ or interop/.
"""

"""The web console and Prometheus ``/metrics``, served by the broker process itself (off by default)."""

"""Request processors, one module per request family."""

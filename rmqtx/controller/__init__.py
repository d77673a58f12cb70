"""A 5.x controller (controller mode, RIP-44): brokers' ids, masters, epochs and sync-state sets, replicated with pysyncobj."""

"""Master/slave replication (HA) on RocketMQ 4.x's HA wire protocol: master, slave, sync, send hook."""

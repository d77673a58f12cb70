"""Plain ACL as Apache RocketMQ 4.9.8 offers it: signed requests, per-resource permissions, white lists."""

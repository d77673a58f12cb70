"""POP consumption (RocketMQ 5.x): checkpoints, acks, revive, orderly pop, request modes."""

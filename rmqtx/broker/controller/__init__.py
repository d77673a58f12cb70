"""The broker side of RocketMQ 5.x controller mode: broker identity, the controller client, role switches."""

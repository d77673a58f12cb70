"""rmqtx: an Apache RocketMQ compatible NameServer and Broker on Twisted."""

__version__ = "0.1.0"

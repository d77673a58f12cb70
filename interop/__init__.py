"""Interop suite: real RocketMQ clients (C++, Node, rmqtx's Python, Java) against a running rmqtx."""

"""Packaging tests (slow: they pip-install rmqtx from scratch); tox runs them once, under trial."""

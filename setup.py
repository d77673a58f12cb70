"""Builds the optional C accelerator; without a C compiler rmqtx installs and runs in pure Python."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("rmqtx._accel", ["rmqtx/_accel.c"], optional=True)])

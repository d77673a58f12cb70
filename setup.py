"""Builds the optional C accelerator (without a C compiler rmqtx installs and runs in pure Python).

An editable install (``pip install -e .``) also gets a second ``.pth`` that puts this tree on
sys.path: twistd looks for plugins only in the ``twisted/plugins`` directory of a sys.path entry, and
setuptools' editable finder maps packages without adding one.
"""

from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.editable_wheel import editable_wheel

ROOT = Path(__file__).resolve().parent


class _WithPluginPath:
    """Wraps setuptools' editable strategy and adds the plugin .pth to the wheel it writes."""

    def __init__(self, inner, name: str) -> None:
        self.inner = inner
        self.name = name

    def __enter__(self):
        self.inner.__enter__()
        return self

    def __exit__(self, *exc):
        return self.inner.__exit__(*exc)

    def __call__(self, wheel, files, mapping) -> None:
        self.inner(wheel, files, mapping)
        wheel.writestr(f"__editable__.{self.name}.twistd-plugins.pth", f"{ROOT}\n".encode())


class EditableWheel(editable_wheel):
    def _select_strategy(self, name, tag, build_lib):
        return _WithPluginPath(super()._select_strategy(name, tag, build_lib), name)


setup(
    ext_modules=[Extension("rmqtx._accel", ["rmqtx/_accel.c"], optional=True)],
    cmdclass={"editable_wheel": EditableWheel},
)

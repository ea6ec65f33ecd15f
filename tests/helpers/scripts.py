"""Import a module of scripts/ (the benchmark and sweep scripts are not a package) for the tests of its helpers."""

import importlib.util
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def load_script(name: str):
    """The module ``scripts/<name>.py``, imported once under ``name`` (a second call returns the same module)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before exec: dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module

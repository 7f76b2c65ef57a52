"""The example programs and benchmarks of a source checkout, which are not installed.

``examples/`` and ``benchmarks/`` sit beside the ``axgraph`` package in the repository:
programs to read and run, with their own dependencies (scikit-learn, PyTorch), not part
of the library's API, and a top-level package named ``examples`` installed into
site-packages would collide with other projects'. So the wheel holds only ``axgraph``,
and ``axgraph train`` and ``axgraph bench`` find these directories next to the package
they run from: a checkout, or an editable install of one (``pip install -e .``).
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from .failures import CommandError

#: The directory holding the ``axgraph`` package: a checkout's root, if it is one.
ROOT = Path(__file__).resolve().parents[2]


def directory(package: str) -> Path:
    """The checkout's `package` directory; a CommandError when this axgraph has none.

    Parameters
    ----------
    package : str
        ``"examples"`` or ``"benchmarks"``.

    Returns
    -------
    Path
        The directory.

    Raises
    ------
    CommandError
        axgraph runs from an installed wheel, not a checkout.
    """
    found = ROOT / package
    if not (found / "__init__.py").is_file():
        raise CommandError(f"the {package} directory is not installed with axgraph (looked in "
                           f"{ROOT}): they come with the source, so clone the repository and "
                           f"pip install -e . there")
    return found


def import_module(package: str, name: str) -> ModuleType:
    """``<package>.<name>`` from the checkout, imported as that package's module (its
    relative imports work), without putting the checkout's root on sys.path.

    Parameters
    ----------
    package : str
        ``"examples"`` or ``"benchmarks"``.
    name : str
        The module in it.

    Returns
    -------
    ModuleType
        The module.

    Raises
    ------
    CommandError
        No checkout (see `directory`).
    """
    found = directory(package)
    loaded = sys.modules.get(package)
    if loaded is None or Path(getattr(loaded, "__file__", "") or "").parent.resolve() != found:
        spec = importlib.util.spec_from_file_location(
            package, found / "__init__.py", submodule_search_locations=[str(found)])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[package] = module
        spec.loader.exec_module(module)
    return importlib.import_module(f"{package}.{name}")

"""Every public name says what it does, what each parameter means and what it returns.

The API reference (docs/api/) is generated from these docstrings, written in NumPy style: a
summary line, then ``Parameters`` (every parameter of the signature, by name), ``Returns`` or
``Yields`` for a function that gives something back, and ``Raises`` where a caller can act on
the error. This test reads the sections the way the reference renders them, so a parameter added
to a signature without a line in its docstring fails here rather than in a reader's hands.
"""
from __future__ import annotations

import enum
import inspect
import re
from typing import Dict, Iterator, List, Set

import pytest

import axgraph
import axgraph.core
import axgraph.frontends.axon
import axgraph.frontends.neon
import axgraph.frontends.onnx
import axgraph.frontends.tensorflow
import axgraph.shapes
import axgraph.testing

NAMESPACES = {
    "axgraph": axgraph,
    "axgraph.core": axgraph.core,
    "axgraph.frontends.axon": axgraph.frontends.axon,
    "axgraph.frontends.neon": axgraph.frontends.neon,
    "axgraph.frontends.onnx": axgraph.frontends.onnx,
    "axgraph.frontends.tensorflow": axgraph.frontends.tensorflow,
    "axgraph.shapes": axgraph.shapes,
    "axgraph.testing": axgraph.testing,
}

_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")


def sections(doc: str) -> Dict[str, List[str]]:
    """The NumPy-style sections of a docstring: title -> the lines under its underline."""
    lines = inspect.cleandoc(doc).splitlines()
    found: Dict[str, List[str]] = {}
    current = None
    for i, line in enumerate(lines):
        if _UNDERLINE.match(line):
            continue
        if i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1]) and line.strip():
            current = line.strip()
            found[current] = []
        elif current is not None:
            found[current].append(line)
    return found


def documented_parameters(doc: str, section: str = "Parameters") -> Set[str]:
    """Names listed in a section (``a, b : Node`` lists two; ``**kwargs`` one)."""
    names: Set[str] = set()
    for line in sections(doc).get(section, []):
        if not line.strip() or line[:1].isspace():
            continue                       # a description line, indented under its entry
        head = line.split(" : ")[0] if " : " in line else line
        for name in head.split(","):
            names.add(name.strip().lstrip("*"))
    return names


def own_doc(value) -> str:
    """The docstring written on the object itself (a class's is not inherited here)."""
    doc = value.__dict__.get("__doc__") if inspect.isclass(value) else value.__doc__
    return doc or ""


def signature_parameters(value) -> List[str]:
    """Parameters a caller passes, as the reference shows them (not self, not cls)."""
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return []
    return [name for name in signature.parameters if name not in ("self", "cls")]


def returns_something(value) -> bool:
    """A function gives something back unless annotated ``-> None``."""
    annotation = inspect.signature(value).return_annotation
    return annotation not in (None, "None", type(None))


def problems_of(value) -> Iterator[str]:
    """What the reference would be missing for one public function or class."""
    doc = own_doc(value)
    if not doc.strip():
        yield "no docstring"
        return
    summary = inspect.cleandoc(doc).splitlines()[0].strip()
    if not summary:
        yield "no summary line"
    if inspect.isclass(value) and (issubclass(value, (BaseException, enum.Enum))
                                   or getattr(value, "_is_protocol", False)):
        return                              # built by the library, not called with arguments
    listed = documented_parameters(doc)
    if inspect.isclass(value) and (hasattr(value, "_fields")
                                   or "__dataclass_fields__" in value.__dict__):
        listed |= documented_parameters(doc, "Attributes")   # a record's fields are its data
    if inspect.isclass(value):          # or its own constructor's docstring (a tuple's __new__)
        for constructor in ("__init__", "__new__"):
            if constructor in value.__dict__:
                listed |= documented_parameters(getattr(value, constructor).__doc__ or "")
    missing = [p for p in signature_parameters(value) if p not in listed]
    if missing:
        yield f"parameters not in its Parameters section: {', '.join(missing)}"
    if inspect.isfunction(value) and returns_something(value):
        titles = sections(doc)
        if "Returns" not in titles and "Yields" not in titles:
            yield "no Returns (or Yields) section"


def public_names(module) -> List[str]:
    """``__all__``, or else the names a module defines itself without a leading underscore."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [name for name, value in vars(module).items()
            if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__]


def public_callables():
    for module_name, module in NAMESPACES.items():
        for name in public_names(module):
            value = getattr(module, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                yield f"{module_name}.{name}", value


def test_the_section_reader_reads_numpy_style():
    doc = """Add two things.

    Parameters
    ----------
    a, b : Node
        The operands.
    **kwargs
        Passed on.

    Returns
    -------
    Node
        Their sum.
    """
    assert documented_parameters(doc) == {"a", "b", "kwargs"}
    assert set(sections(doc)) == {"Parameters", "Returns"}


@pytest.mark.parametrize("module_name", sorted(NAMESPACES))
def test_every_public_name_is_documented_in_full(module_name):
    report = []
    for qualified, value in public_callables():
        if qualified.rsplit(".", 1)[0] != module_name:
            continue
        for problem in problems_of(value):
            report.append(f"{qualified}: {problem}")
    assert report == [], "\n".join(report)

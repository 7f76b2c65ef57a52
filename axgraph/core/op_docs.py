"""The docstring of each core op class, composed from its own text and its family's.

An op class's docstring says what is its own: the summary (its formula), a
sentence on its semantics, and whichever NumPy-style entries differ from its
family's. The entries it leaves out are filled in when the class is created
(`Node.__init_subclass__`), so the class ends up with a complete docstring of
its own, which is what `help()` and the API reference read:

* a `Parameters` entry, by parameter name, for each constructor parameter;
* the `Returns` section, whole;
* a `Raises` entry, by exception name.

Each comes from the first text that has it, looking at the class and then its
base classes, nearest first: at each, its docstring as written, then the
fragment its `_doc_shared` names (entries shared by ops of no common base, such
as the window geometry of convolution and pooling). So a family base class
(`UnaryElementwise`, `Reduction`, ...) states once what its ops share, `Node`
states the `name` parameter and the errors every node raises, and an op
restates an entry only to say something else. Filled-in text may say ``{op}``
(the class's name) and ``{accepts}`` (the element types its `accepts` trait
admits, such as "a floating-point"). A class whose parameters cannot all be
found keeps its docstring as written. Composing all the core ops takes about a
millisecond at import.
"""
from __future__ import annotations

import inspect
import re
import weakref
from typing import Dict, List, Mapping, MutableMapping, NamedTuple, Optional, Sequence, Tuple

#: Sections in the order NumPy-style docstrings give them; others follow in their own order.
SECTION_ORDER = ("Parameters", "Returns", "Yields", "Raises", "Warns", "See Also", "Notes",
                 "References", "Examples")

_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_FIELD = re.compile(r"\{(op|accepts)\}")
_COMPOSED = ("Parameters", "Returns", "Raises")


class Entry(NamedTuple):
    """One entry of a Parameters or Raises section: the names its first line lists
    (``a, b : Node`` lists a and b), and its lines, the description indented below."""

    names: Tuple[str, ...]
    lines: Tuple[str, ...]


class Docstring(NamedTuple):
    """A docstring split into its head (summary and description) and its sections,
    with the entries of its Parameters and Raises sections by name."""

    head: Tuple[str, ...]
    sections: Dict[str, Tuple[str, ...]]
    parameters: Dict[str, Entry]
    raises: Dict[str, Entry]


def _strip_blank_end(lines: Sequence[str]) -> Tuple[str, ...]:
    end = len(lines)
    while end and not lines[end - 1].strip():
        end -= 1
    return tuple(lines[:end])


def _entries(lines: Sequence[str]) -> Dict[str, Entry]:
    """Each name an entry's first line lists -> that entry (so `a, b : Node` twice)."""
    starts = [i for i, line in enumerate(lines) if line.strip() and not line[:1].isspace()]
    by_name: Dict[str, Entry] = {}
    for start, end in zip(starts, starts[1:] + [len(lines)]):
        names = tuple(n.strip().lstrip("*") for n in lines[start].split(" : ")[0].split(","))
        entry = Entry(names, _strip_blank_end(lines[start:end]))
        for name in names:
            by_name.setdefault(name, entry)
    return by_name


def parse(doc: Optional[str]) -> Docstring:
    """`doc` (a raw docstring) as its head and its sections, by title."""
    lines = inspect.cleandoc(doc or "").splitlines()
    head: List[str] = []
    sections: Dict[str, List[str]] = {}
    current = head
    underlined = [line.lstrip().startswith("---") and _UNDERLINE.match(line) is not None
                  for line in lines] + [False]
    for i, line in enumerate(lines):
        if underlined[i]:
            continue
        if underlined[i + 1] and line.strip():
            current = sections.setdefault(line.strip(), [])
        else:
            current.append(line)
    return Docstring(_strip_blank_end(head),
                     {title: _strip_blank_end(body) for title, body in sections.items()},
                     _entries(sections.get("Parameters", ())), _entries(sections.get("Raises", ())))


def render(head: Sequence[str], sections: Mapping[str, Sequence[str]]) -> str:
    """Docstring text: `head`, then `sections` (title -> lines) in the NumPy order."""
    titles = [t for t in SECTION_ORDER if t in sections]
    titles += [t for t in sections if t not in titles]
    parts = ["\n".join(head)]
    parts += ["\n".join((title, "-" * len(title), *sections[title])) for title in titles]
    return "\n\n".join(parts) + "\n"


def constructor_parameters(cls: type) -> Tuple[str, ...]:
    """The parameters a caller passes to `cls(...)`, in order (not self)."""
    code = getattr(getattr(cls, "__init__", None), "__code__", None)
    if code is None:
        return ()
    count = code.co_argcount + code.co_kwonlyargcount
    names = list(code.co_varnames[:count])
    if code.co_flags & inspect.CO_VARARGS:
        names.append(code.co_varnames[count])
        count += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        names.append(code.co_varnames[count])
    return tuple(names[1:])


# The docstring each class was written with, before composing (what subclasses inherit from).
_WRITTEN: MutableMapping[type, Docstring] = weakref.WeakKeyDictionary()
_SHARED: Dict[str, Docstring] = {}


def _written(cls: type) -> Docstring:
    if cls not in _WRITTEN:
        _WRITTEN[cls] = parse(cls.__dict__.get("__doc__"))
    return _WRITTEN[cls]


def _sources(cls: type, root: type) -> List[Docstring]:
    """The texts `cls`'s entries are looked up in, first one first: for each class from
    `cls` up to `root`, its docstring as written, then the fragment it names."""
    sources = []
    for base in cls.__mro__:
        if issubclass(base, root):
            sources.append(_written(base))
            shared = base.__dict__.get("_doc_shared")
            if shared:
                if shared not in _SHARED:
                    _SHARED[shared] = parse(shared)
                sources.append(_SHARED[shared])
    return sources


def _fields(cls: type) -> Dict[str, str]:
    fields = {"op": cls.__name__}
    accepts = getattr(cls, "accepts", None)
    if accepts is not None:
        from .ops._checks import KINDS  # the ops package imports this module's user, Node

        fields["accepts"] = KINDS[accepts][1]
    return fields


def compose(cls: type, root: type) -> None:
    """Give `cls` (a subclass of `root`) its complete docstring, as the module says."""
    if not cls.__dict__.get("__doc__"):
        return
    sources = _sources(cls, root)
    signature = constructor_parameters(cls)
    parameters: List[str] = []
    listed: set = set()
    for name in signature:
        if name in listed:
            continue  # an entry listing several names (`a, b : Node`) comes once
        entry = next((s.parameters[name] for s in sources if name in s.parameters
                      and set(s.parameters[name].names) <= set(signature)), None)
        if entry is None:
            return  # not every parameter is described anywhere: keep the text as written
        parameters += entry.lines
        listed.update(entry.names)
    raises: Dict[str, Entry] = {}
    for source in reversed(sources):  # the nearest text's entry wins, in the nearest's order
        raises = {**source.raises, **{k: v for k, v in raises.items() if k not in source.raises}}
    sections = dict(sources[0].sections)
    sections["Parameters"] = tuple(parameters)
    sections["Raises"] = tuple(line for entry in dict.fromkeys(raises.values())
                               for line in entry.lines)
    sections["Returns"] = next((s.sections["Returns"] for s in sources
                                if "Returns" in s.sections), ())
    fields = _fields(cls)

    def fill(match) -> str:
        return fields.get(match.group(1), match.group(0))

    for title in _COMPOSED:
        text = "\n".join(sections[title])
        if not text:
            del sections[title]
        elif "{" in text:
            sections[title] = tuple(_FIELD.sub(fill, text).split("\n"))
    cls.__doc__ = render(sources[0].head, sections)


__all__ = ["Docstring", "Entry", "SECTION_ORDER", "compose", "constructor_parameters", "parse",
           "render"]

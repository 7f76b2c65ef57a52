"""Python's own help text (``pydoc_data.topics``, shipped inside CPython) as a corpus."""
from __future__ import annotations


def load_help_text() -> str:
    """The help topics of CPython's pydoc (about 465,000 characters of English prose and
    code), joined in the sorted order of their names so that every run sees the same text."""
    from pydoc_data.topics import topics

    return "".join(topics[name] for name in sorted(topics))

"""docs/architecture.md, "Adding a pass": the pass it shows, defined here word for word,
run through the PassManager with the default pipeline, its rules fired and traced."""
from __future__ import annotations

import pathlib
import re
import textwrap

import numpy as np

from axgraph import core, passes
from axgraph.passes import Any, Op, RewriteRule

ARCHITECTURE = pathlib.Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def add_instead(match):
    """x - (-y) is x + y, exactly (signed zeros too): one op less."""
    return core.Add(match["x"], match["y"])


class SubtractNegative(passes.RulePass):
    """Rewrite x - (-y) as x + y."""

    name = "subtract-negative"
    rules = (RewriteRule(Op(core.Subtract, Any("x"), Op(core.Negative, Any("y"))),
                         add_instead, "subtract-negative-as-add"),)


def test_the_walkthrough_shows_this_files_pass():
    section = ARCHITECTURE.read_text().split("## Adding a pass", 1)[1]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    shown = textwrap.dedent(block).split("\n\n\n", 1)[1]  # after the imports
    assert shown.strip() in pathlib.Path(__file__).read_text()


def test_the_new_pass_runs_through_the_manager():
    x = core.Parameter(core.f64, (4,), name="x")
    y = core.Parameter(core.f64, (4,), name="y")
    with core.at_location(("model.py", 3)):
        z = core.Subtract(x, core.Negative(core.Multiply(y, y)))
    f = core.Function([core.Subtract(z, core.Negative(x))], [x, y])
    lines: list = []
    manager = passes.PassManager([SubtractNegative()] + passes.default_passes(), max_rounds=3,
                                 trace=lines.append)
    g = manager.run(f)
    assert str(g) == textwrap.dedent("""\
        function(x, y):
          x = Parameter() : f64[4]
          y = Parameter() : f64[4]
          %0 = Multiply(y, y) : f64[4]
          %1 = Add(x, %0) : f64[4]
          %2 = Add(%1, x) : f64[4]
          return %2""")
    first = manager.report[0]
    assert first.name == "subtract-negative" and first.nodes_before - first.nodes_after == 2
    assert first.rules_fired == (("subtract-negative-as-add", 2),)
    assert manager.report[len(passes.default_passes()) + 1].rules_fired == ()  # round 2
    assert lines[0].startswith("axgraph pass subtract-negative: subtract-negative-as-add at "
                               "model.py:3 (Subtract")
    assert len(lines) == 2 and f"{__file__}:" in lines[1]
    xv = np.array([1.0, -2.0, 0.5, -0.0])
    yv = np.array([3.0, 0.25, -1.0, 0.0])
    (got,) = core.compile(g)(xv, yv)
    np.testing.assert_array_equal(got, (xv + yv * yv) + xv)
    (before,) = core.compile(f)(xv, yv)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(before))  # -0 - (-0) is +0

"""Every kind of axes op says what it does to lengths: each Op class of axgraph has a length
rule in axgraph.shapes.op_rules, and the rule is at least as new as the class's
`infer_axes` (a subclass that infers its axes differently needs a rule of its own)."""
import importlib
import pkgutil

import axgraph
from axgraph.op_graph.op import Op
from axgraph.shapes.op_rules import RULE_SUMMARIES, rule_class


def _all_op_classes():
    for info in pkgutil.walk_packages(axgraph.__path__, "axgraph."):
        if ".transformers.cpu" in info.name or info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)
    found, stack = set(), [Op]
    while stack:
        klass = stack.pop()
        for sub in klass.__subclasses__():
            if sub.__module__.startswith("axgraph.") and sub not in found:
                found.add(sub)
                stack.append(sub)
    return sorted(found, key=lambda k: (k.__module__, k.__name__))


def test_every_op_class_has_a_length_rule_as_new_as_its_infer_axes():
    missing = []
    classes = _all_op_classes()
    assert len(classes) > 60
    for klass in classes:
        infers = next(k for k in klass.__mro__ if "infer_axes" in k.__dict__)
        ruled = rule_class(klass)
        if ruled is None or not issubclass(ruled, infers):
            missing.append(f"{klass.__module__}.{klass.__name__} (infer_axes of "
                           f"{infers.__name__}, rule of {getattr(ruled, '__name__', None)})")
    assert missing == [], "op classes without a length rule:\n" + "\n".join(missing)


def test_a_new_op_class_that_infers_its_axes_needs_a_rule():
    class Twice(Op):
        def infer_axes(self):
            return self.args[0].axes

    ruled = rule_class(Twice)
    assert ruled is Op and not issubclass(ruled, Twice)  # what the test above refuses


def test_each_rule_says_what_it_does():
    assert all(summary for summary in RULE_SUMMARIES.values())

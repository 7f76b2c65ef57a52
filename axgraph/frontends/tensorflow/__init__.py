"""TensorFlow graphs as axes graphs: `TFImporter` (optional extra ``axgraph[tensorflow]``).

Nervana Graph v0.4's TensorFlow importer, for graphs that TensorFlow 2 builds
through ``tf.compat.v1``. TensorFlow is imported when a graph is imported, not
with this module.
"""
from .importer import TFImporter
from .rules import TFImportError, UnsupportedOpError, supported_ops
from .utils import SGDOptimizer

__all__ = ["SGDOptimizer", "TFImporter", "TFImportError", "UnsupportedOpError", "supported_ops"]

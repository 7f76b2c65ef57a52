"""ONNX models as axes graphs: `import_model` (optional extra ``axgraph[onnx]``).

The `onnx` package is imported when a model is imported, not with this module.
"""
from .import_rules import OnnxImportError, UnsupportedOperatorError, supported_operators
from .importer import ImportedModel, import_model

__all__ = ["ImportedModel", "OnnxImportError", "UnsupportedOperatorError", "import_model",
           "supported_operators"]

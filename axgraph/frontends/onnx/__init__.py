"""ONNX interchange for axes graphs (needs the optional extra ``axgraph[onnx]``).

`import_model` reads an ONNX model as axgraph ops on named axes; `export` writes a
computation as an ONNX model file. The `onnx` package is imported when one of them is
called, not with this module, so importing it needs NumPy alone.
"""
from .export_graph import OnnxExportError, OnnxNotInstalledError
from .exporter import export
from .import_rules import OnnxImportError, UnsupportedOperatorError, supported_operators
from .importer import ImportedModel, import_model

__all__ = ["ImportedModel", "OnnxExportError", "OnnxImportError", "OnnxNotInstalledError",
           "UnsupportedOperatorError", "export", "import_model", "supported_operators"]

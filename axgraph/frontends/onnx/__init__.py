"""ONNX interchange for axes graphs (needs the optional extra ``axgraph[onnx]``).

`export` writes a computation as an ONNX model file; onnx is imported only
when it is called, so importing this package needs NumPy alone.
"""
from .exporter import export

__all__ = ["export"]

"""The cpu transformer: planned memory, generated Python, fused kernels (issue 5)."""

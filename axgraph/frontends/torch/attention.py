"""Scaled dot-product attention as matrix products and a softmax.

The bridge compiles a graph with PyTorch's math path for attention (`math_attention`,
entered while AOTAutograd traces): `scaled_dot_product_attention` becomes
softmax(scale * Q K^T (+ mask)) V before autograd sees it, so autograd differentiates a
product, a softmax and a product. The backward graph then reuses the softmax P that the
forward saved instead of recomputing the scores and their exponentials from a
log-sum-exp (one batched product and three passes over the scores fewer; measured on the
benchmark's transformer block, batch 8, 4 heads of 32 x 32: the two graphs' work 1459 ->
1417 us, one thread), the softmax and its gradient run as the cpu transformer's row
kernels, and a query whose every key is masked gets zeros, as in eager PyTorch (the math
path's `_safe_softmax`, decomposed here by `safe_softmax` into ops that fuse into one pass).

PyTorch's fused CPU attention and its fused gradient (the pair
`_scaled_dot_product_flash_attention_for_cpu` and its `_backward`), where a graph has
them anyway, are decomposed consistently with each other into ops the rule table has:

    S = scale * Q K^T (+ mask),  L = logsumexp(S),  P = exp(S - L),  O = P V
    dV = P^T dO,  dS = P * (dO V^T - rowsum(dO * O)),  dQ = scale * dS K,
    dK = scale * dS^T Q

With dropout (p > 0) they decline, and PyTorch's fused ops run instead.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import torch

aten = torch.ops.aten


def _scores(query: torch.Tensor, key: torch.Tensor, is_causal: bool,
            attn_mask: Optional[torch.Tensor], scale: float) -> torch.Tensor:
    scores = torch.matmul(query, key.transpose(-2, -1)) * scale
    if is_causal:
        length, source = query.shape[-2], key.shape[-2]
        allowed = torch.ones(length, source, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    if attn_mask is not None:
        scores = (scores.masked_fill(~attn_mask, float("-inf"))
                  if attn_mask.dtype == torch.bool else scores + attn_mask)
    return scores


def _scale(query: torch.Tensor, scale: Optional[float]) -> float:
    return 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale


def attention_forward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      dropout_p: float = 0.0, is_causal: bool = False, *,
                      attn_mask: Optional[torch.Tensor] = None,
                      scale: Optional[float] = None) -> Any:
    """(output, logsumexp of the scores): the fused CPU attention's results."""
    if dropout_p != 0.0:
        return NotImplemented
    scores = _scores(query, key, is_causal, attn_mask, _scale(query, scale))
    peak = scores.amax(-1, keepdim=True)
    log_total = torch.log(torch.exp(scores - peak).sum(-1, keepdim=True)) + peak
    weights = torch.exp(scores - log_total)
    return torch.matmul(weights, value), log_total.squeeze(-1)


def attention_backward(grad_out: torch.Tensor, query: torch.Tensor, key: torch.Tensor,
                       value: torch.Tensor, out: torch.Tensor, logsumexp: torch.Tensor,
                       dropout_p: float, is_causal: bool, *,
                       attn_mask: Optional[torch.Tensor] = None,
                       scale: Optional[float] = None) -> Any:
    """(dQ, dK, dV) from the saved output and logsumexp."""
    if dropout_p != 0.0:
        return NotImplemented
    factor = _scale(query, scale)
    weights = torch.exp(_scores(query, key, is_causal, attn_mask, factor)
                        - logsumexp.unsqueeze(-1))
    grad_value = torch.matmul(weights.transpose(-2, -1), grad_out)
    row = (grad_out * out).sum(-1, keepdim=True)
    grad_scores = weights * (torch.matmul(grad_out, value.transpose(-2, -1)) - row)
    grad_query = torch.matmul(grad_scores, key) * factor
    grad_key = torch.matmul(grad_scores.transpose(-2, -1), query) * factor
    return grad_query, grad_key, grad_value


def safe_softmax(x: torch.Tensor, dim: int, dtype: Optional[torch.dtype] = None) -> Any:
    """Softmax over `dim`, with zeros in a row whose every value is -inf (`_safe_softmax`).

    Whether a row has a value other than -inf is asked as the largest of its
    (x != -inf) as 0 or 1 (a NaN counts as other, as in PyTorch's all(x == -inf)):
    the cpu transformer recognises the whole pattern and computes it inside the
    softmax's row kernel as it finds each row's largest value (its fusion's
    `zeroed_rows_softmax`: on the benchmark's block one pass over the scores, 34 us,
    where the comparison, the softmax and the Select took three, 62 us). Rows of no
    values keep PyTorch's decomposition (they have no largest value).
    """
    if isinstance(x.shape[dim], int) and x.shape[dim] == 0:
        from torch._decomp.decompositions import safe_softmax as by_comparison
        return by_comparison(x, dim, dtype)
    out = torch.softmax(x, dim, dtype=dtype)
    other = (x != float("-inf")).to(torch.float32).amax(dim, keepdim=True)
    return torch.where(other == 0, torch.zeros_like(out), out)


def math_attention() -> Any:
    """A block inside which `scaled_dot_product_attention` takes PyTorch's math path.

    Returns
    -------
    context manager
        PyTorch's ``sdpa_kernel(SDPBackend.MATH)``; attention with dropout takes that
        path in eager PyTorch on CPU too, drawing its masks the same way.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(SDPBackend.MATH)


def attention_decompositions() -> Tuple[Tuple[Any, Any], ...]:
    """The (op, decomposition) pairs for the fused CPU attention and its gradient, and for
    the math path's softmax."""
    return ((aten._scaled_dot_product_flash_attention_for_cpu.default, attention_forward),
            (aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
             attention_backward),
            (aten._safe_softmax.default, safe_softmax))


__all__ = ["attention_forward", "attention_backward", "attention_decompositions",
           "math_attention", "safe_softmax"]

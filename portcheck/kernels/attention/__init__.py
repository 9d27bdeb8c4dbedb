"""Attention forward, FlashAttention style: one pass over the keys with an online softmax.

Layout: q [batch, heads_q, seq_q, head_dim], k and v [batch, heads_kv, seq_k, head_dim], out like
q; any strides with a unit stride along head_dim (a [batch, seq, heads, head_dim] tensor viewed
with .transpose(1, 2) works). Query head h reads key/value head h // (heads_q // heads_kv):
grouped-query attention, multi-query when heads_kv == 1. The causal mask is aligned top-left like
torch's scaled_dot_product_attention(is_causal=True): query i sees keys j <= i.

One program owns BLOCK_M query rows of one head and streams BLOCK_N keys at a time: scores in
fp32 from one tl.dot, log2(e) folded into the scale so the exponentials are exp2, the running max
and sum rescaled when the max grows, and P cast to the input dtype for the second tl.dot. Causal
programs run the key tiles left of the diagonal without any mask, then only the diagonal tiles
with it; tiles right of the diagonal are never loaded. Launch configurations are data, per
arch config family (configs/attention.toml), picked from the active device's arch.

kernel.py holds the @triton.jit sources, launcher.py the configurations, checks and launch,
case.py the tolerance model and the Cases (registered when this package is imported).
"""
from .case import attention_tolerance, convex_combination_bound, descriptor_variants, visible_pairs
from .launcher import (DTYPES, HEAD_DIMS, LOG2E, MIN_BLOCK_N, Config, arch_configs, attention,
                       check_heads, check_tensor, descriptor_obstacle, descriptors_supported)

__all__ = ["DTYPES", "HEAD_DIMS", "LOG2E", "MIN_BLOCK_N", "Config", "arch_configs", "attention",
           "attention_tolerance", "check_heads", "check_tensor", "convex_combination_bound",
           "descriptor_obstacle", "descriptor_variants", "descriptors_supported", "visible_pairs"]

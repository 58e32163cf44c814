"""Neutral ground for both kernel packages and the harness: the variant record, operand validation and facts.

Imports torch and nothing of the project, so `triton_kernels`, `ptx_kernels` and `compare` may all import it.
"""

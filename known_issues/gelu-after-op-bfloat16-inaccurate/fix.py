"""gelu's decomposition is computed in float32 for float16 and bfloat16 inputs and rounded once, as eager's gelu
kernels do (their opmath type)."""

WHY = (
    "thunder's gelu (thunder/torch/__init__.py) is a * (0.5 + 0.5 * erf(a / sqrt(2))) in the input's dtype: in "
    "bfloat16 the normal cdf 0.5 + 0.5 * erf(...) cancels for negative inputs after each term was rounded, so "
    "outputs of -0.0026 become -0 (17x eager's error). A lone gelu runs as torch's kernel, which computes in float32; "
    "where gelu is fused behind another op, the decomposition runs. The fix converts the input to the computation "
    "dtype, computes gelu (both approximations) there, and converts the result back: one rounding, as in eager."
)
EDITS = [
    Edit(
        "thunder.torch",
        old="""def gelu(a: TensorProxy, /, *, approximate: str = "none") -> TensorLike:
    if approximate == "none":
        # gelu(a) = a * Phi(a), where Phi is the cdf for the Normal Gaussian.
        # We use the error function to compute Phi.
        phi_a = 0.5 + 0.5 * erf(a / (math.sqrt(2)))
        return a * phi_a
    elif approximate == "tanh":
        a_pow_3 = a * a * a
        return 0.5 * a * (1.0 + tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a_pow_3)))
""",
        new="""def gelu(a: TensorProxy, /, *, approximate: str = "none") -> TensorLike:
    dtype, a = a.dtype, to(a, utils.get_computation_dtype(a.dtype))  # eager's opmath: float32 for half types
    if approximate == "none":
        # gelu(a) = a * Phi(a), where Phi is the cdf for the Normal Gaussian.
        # We use the error function to compute Phi.
        phi_a = 0.5 + 0.5 * erf(a / (math.sqrt(2)))
        return to(a * phi_a, dtype)
    elif approximate == "tanh":
        a_pow_3 = a * a * a
        return to(0.5 * a * (1.0 + tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a_pow_3))), dtype)
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_ops.py -k gelu", "thunder/tests/test_grad.py -k gelu"]

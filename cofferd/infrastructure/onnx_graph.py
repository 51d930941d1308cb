"""One rewrite of an ONNX model's graph: a quantized lookup table stays quantized.

The bundled all-MiniLM-L6-v2 stores its weights as int8 with a scale, widened by a
`Cast` and a `Mul` before use. onnxruntime folds those into float32 weights when it loads
the model; for the word-embedding table (30,522 by 384) that is 47 MB held for a lookup of
a few hundred rows a run. Here each `Gather` from such a table gathers the int8 rows and
their scales first, then widens only them: the same numbers, the table kept at 12 MB.

onnx itself is not a dependency: the messages are declared here with the few fields the
rewrite reads or writes; every other field travels through untouched (protobuf keeps the
fields it does not know, bytes for bytes).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

INT = 2  # onnx AttributeProto.AttributeType

_STRING = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
_INT64 = descriptor_pb2.FieldDescriptorProto.TYPE_INT64
_INT32 = descriptor_pb2.FieldDescriptorProto.TYPE_INT32
_MESSAGE = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
_ONE = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
_MANY = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED

# (message, [(field number, name, type, label, message type)]), field numbers as onnx.proto
_SUBSET = [
    ("AttributeProto", [(1, "name", _STRING, _ONE, ""), (3, "i", _INT64, _ONE, ""),
                        (20, "type", _INT32, _ONE, "")]),
    ("TensorProto", [(1, "dims", _INT64, _MANY, ""), (8, "name", _STRING, _ONE, "")]),
    ("NodeProto", [(1, "input", _STRING, _MANY, ""), (2, "output", _STRING, _MANY, ""),
                   (3, "name", _STRING, _ONE, ""), (4, "op_type", _STRING, _ONE, ""),
                   (5, "attribute", _MESSAGE, _MANY, "AttributeProto"),
                   (7, "domain", _STRING, _ONE, "")]),
    ("GraphProto", [(1, "node", _MESSAGE, _MANY, "NodeProto"),
                    (5, "initializer", _MESSAGE, _MANY, "TensorProto")]),
    ("ModelProto", [(7, "graph", _MESSAGE, _ONE, "GraphProto")]),
]  # fmt: skip


def _model_class() -> Any:
    file = descriptor_pb2.FileDescriptorProto(
        name="coffer_onnx_subset.proto", package="coffer_onnx_subset", syntax="proto2"
    )
    for message, fields in _SUBSET:
        declared = file.message_type.add(name=message)
        for number, name, kind, label, type_name in fields:
            field = declared.field.add(name=name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = f".coffer_onnx_subset.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("coffer_onnx_subset.ModelProto")
    )


def gather_quantized_rows(model: bytes) -> bytes:
    """The model with every Gather from a row-scaled table (Cast → Mul → Gather) turned
    into Gather → Cast → Mul of the rows gathered; other nodes as they were."""
    proto = _model_class().FromString(model)
    nodes = list(proto.graph.node)
    shapes = {tensor.name: list(tensor.dims) for tensor in proto.graph.initializer}
    users: defaultdict[str, list[int]] = defaultdict(list)
    for index, node in enumerate(nodes):
        for name in node.input:
            users[name].append(index)
    replaced: dict[int, list[Any]] = {}  # a Gather's index -> the nodes in its place
    for index, cast in enumerate(nodes):
        table = _row_scaled_table(index, nodes, users, shapes)
        if table is None:
            continue
        mul, scale, gathers = table
        for gather in gathers:
            replaced[gather] = _gather_then_widen(nodes[gather], cast, scale)
        replaced[index] = replaced[mul] = []
    del proto.graph.node[:]
    proto.graph.node.extend(new for i, node in enumerate(nodes) for new in replaced.get(i, [node]))
    return bytes(proto.SerializeToString())


def _row_scaled_table(
    index: int, nodes: list[Any], users: dict[str, list[int]], shapes: dict[str, list[int]]
) -> tuple[int, str, list[int]] | None:
    """(its Mul, the scale, the Gathers), by index, when node `index` is a Cast of a table
    (an initializer) that is scaled row by row and only ever gathered from along its rows;
    else None."""
    cast = nodes[index]
    if cast.op_type != "Cast" or cast.domain or cast.input[0] not in shapes:
        return None
    after_cast = users[cast.output[0]]
    mul = nodes[after_cast[0]] if len(after_cast) == 1 else None
    if mul is None or mul.op_type != "Mul" or mul.domain:
        return None
    scales = [name for name in mul.input if name != cast.output[0]]
    if len(scales) != 1 or shapes.get(scales[0]) != [*shapes[cast.input[0]][:1], 1]:
        return None
    gathers = users[mul.output[0]]
    if not gathers or not all(_gathers_rows_of(nodes[g], mul.output[0]) for g in gathers):
        return None
    return after_cast[0], scales[0], gathers


def _gathers_rows_of(node: Any, table: str) -> bool:
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    return bool(
        node.op_type == "Gather" and not node.domain and node.input[0] == table and axis == 0
    )


def _gather_then_widen(gather: Any, cast: Any, scale: str) -> list[Any]:
    """The nodes that replace `gather`: its rows, and their scales, gathered first."""
    indices, out = gather.input[1], gather.output[0]
    to = next(a.i for a in cast.attribute if a.name == "to")

    def make(op: str, inputs: list[str], output: str, **ints: int) -> Any:
        made = type(gather)(
            op_type=op, input=inputs, output=[output], name=f"{gather.name}/{output}"
        )
        for name, value in ints.items():
            made.attribute.add(name=name, i=value, type=INT)
        return made

    return [
        make("Gather", [cast.input[0], indices], f"{out}/rows", axis=0),
        make("Gather", [scale, indices], f"{out}/scales", axis=0),
        make("Cast", [f"{out}/rows"], f"{out}/widened", to=to),
        make("Mul", [f"{out}/widened", f"{out}/scales"], out),
    ]

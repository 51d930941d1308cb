"""Libraries markitdown imports that a conversion may never use, imported when first used.

`import markitdown` imports every converter's libraries whatever the format: magika and
onnxruntime (its guess at a file's type), pandas (spreadsheets), python-pptx, pdfplumber,
mammoth, ... about 0.7 s of CPU before the converter's process can take its first file
(docs/benchmarks.md, issue 35 §6). Each name deferred here is a placeholder module until an
attribute of it is read: then the real module is imported and answers, so what a library
does with it is unchanged, only later (an ImportError then is the conversion's failure,
as any other). Only a plain `import name` is deferred; `from name import x` or a
submodule's import reads it at once, which costs nothing but the saving.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Iterable
from typing import Any


class _Deferred(types.ModuleType):
    def __getattr__(self, attribute: str) -> Any:
        real = sys.modules.get(self.__name__)
        if real is self or real is None:
            sys.modules.pop(self.__name__, None)
            real = importlib.import_module(self.__name__)
        return getattr(real, attribute)


def defer(names: Iterable[str]) -> None:
    """Each of these top-level modules imported when first used, unless imported already or
    not installed (then its import fails where it is written, as the library expects)."""
    for name in names:
        if name not in sys.modules and importlib.util.find_spec(name) is not None:
            sys.modules[name] = _Deferred(name)


def is_deferred(name: str) -> bool:
    """Whether `name` is still a placeholder (not imported for real yet)."""
    return isinstance(sys.modules.get(name), _Deferred)

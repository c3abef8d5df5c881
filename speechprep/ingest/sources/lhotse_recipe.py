"""A corpus in its published layout, read by Lhotse's own recipe:
``lhotse_recipe: {name: librispeech, corpus_dir: DIR, parts: [...], options: {...}}``.

``lhotse.recipes.prepare_<name>`` runs on the local copy in ``corpus_dir`` (any recipe
Lhotse has; ``librispeech``, ``libritts`` and ``vctk`` are the ones the tests run) and its
manifests, kept in memory (nothing is written beside the corpus), are read as
:mod:`.lhotse` reads a manifest: each supervision an utterance with its text, speaker,
gender and language, each recording no supervision names a whole file for VAD.

* ``parts`` goes to the recipe's parts argument (``dataset_parts``, ``parts``, ``subsets``,
  ``splits`` or ``languages``, whichever it has); without it the recipe's default.
* ``options``: more keyword arguments of the recipe (``mic_id`` for VCTK,
  ``normalize_text`` for LibriSpeech); a name the recipe does not take is a usage error.
* **Nothing is downloaded**: the recipe runs with the network shut (every socket connect
  and name look-up refused); a recipe that reaches for it stops with a usage error that
  says so and what to download by hand. The ``download_<name>`` functions are never
  called.
* What a recipe leaves out (Lhotse's ``fix_manifests`` drops recordings without
  supervisions and the other way round, a LibriSpeech line whose file is gone) is the
  recipe's decision, logged by Lhotse; what it returns ends in the manifest or the rejects.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import socket
import tempfile
from typing import Any

from ...errors import UsageError
from .lhotse import Emitter

log = logging.getLogger("speechprep.ingest")
PARTS_ARGS = ("dataset_parts", "parts", "subsets", "splits", "languages")
KEYS = ("name", "corpus_dir", "parts", "options")


class NetworkRefused(BaseException):
    """A recipe reached for the network (a BaseException, so no recipe's ``except Exception`` hides it)."""


@contextlib.contextmanager
def no_network():
    """Every socket connect and name look-up in this process refused while inside."""

    def refuse(*args, **kwargs):
        raise NetworkRefused(repr(args[1] if len(args) > 1 else args[0] if args else kwargs)[:200])

    saved = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo, socket.create_connection
    socket.socket.connect = socket.socket.connect_ex = refuse  # type: ignore[method-assign]
    socket.getaddrinfo = socket.create_connection = refuse  # type: ignore[assignment]
    try:
        yield
    finally:
        socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo, socket.create_connection = saved


def recipe(name: str):
    """``lhotse.recipes.prepare_<name>``, or a usage error naming the recipes there are."""
    import lhotse.recipes as recipes

    if not isinstance(name, str) or not name.isidentifier():
        raise UsageError(f"lhotse_recipe.name: expected a recipe name (librispeech, libritts, vctk, ...), got {name!r}")
    fn = getattr(recipes, f"prepare_{name}", None)
    if fn is None:
        known = sorted(n[len("prepare_") :] for n in dir(recipes) if n.startswith("prepare_"))
        raise UsageError(f"lhotse_recipe.name: Lhotse has no recipe {name!r}; it has {', '.join(known)}")
    return fn


def arguments(fn, spec: dict, output_dir: str) -> dict[str, Any]:
    """The recipe's keyword arguments for ``spec``."""
    params = inspect.signature(fn).parameters
    name = spec["name"]
    corpus_dir = spec.get("corpus_dir")
    if not isinstance(corpus_dir, str) or not os.path.isdir(corpus_dir):
        raise UsageError(f"lhotse_recipe.corpus_dir: {corpus_dir!r} is not a directory (a local copy of {name})")
    kwargs: dict[str, Any] = {}
    if "corpus_dir" in params:  # a few recipes take their folders by other names: options gives them
        kwargs["corpus_dir"] = os.path.abspath(corpus_dir)
    if spec.get("parts") is not None:
        arg = next((a for a in PARTS_ARGS if a in params), None)
        if arg is None:
            raise UsageError(f"lhotse_recipe.parts: prepare_{name} takes no parts argument (it reads the whole corpus)")
        parts = spec["parts"]
        kwargs[arg] = [parts] if isinstance(parts, str) else list(parts)
    options = spec.get("options") or {}
    if not isinstance(options, dict):
        raise UsageError(f"lhotse_recipe.options: expected a mapping of prepare_{name}'s arguments, got {options!r}")
    for k, v in options.items():
        if k not in params or k in ("corpus_dir", "output_dir", *PARTS_ARGS):
            takes = [p for p in params if p not in ("corpus_dir", "output_dir", *PARTS_ARGS)]
            raise UsageError(f"lhotse_recipe.options: prepare_{name} takes no {k!r} here (it takes {takes})")
        kwargs[k] = v
    if "output_dir" in params and params["output_dir"].default is inspect.Parameter.empty:
        kwargs["output_dir"] = output_dir  # a recipe that must write its manifests somewhere: a scratch dir
    needed = [k for k, p in params.items() if p.default is inspect.Parameter.empty and k not in kwargs]
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    needed = [k for k in needed if params[k].kind not in variadic]
    if needed:
        raise UsageError(f"lhotse_recipe: prepare_{name} needs {needed} besides corpus_dir: give them under options")
    return kwargs


def parts(manifests: Any) -> list[tuple[str, dict]]:
    """``(part, {recordings, supervisions | cuts})`` of a recipe's result (one part, a dict of
    parts, or parts of parts)."""
    if isinstance(manifests, dict) and any(k in manifests for k in ("recordings", "supervisions", "cuts")):
        return [("", manifests)]
    if isinstance(manifests, dict):
        return [(f"{k}/{p}".strip("/"), m) for k, v in manifests.items() for p, m in parts(v)]
    return []


def read(spec: Any, out) -> None:
    """Every supervision (and recording without one) ``prepare_<name>`` finds in ``corpus_dir``."""
    if not isinstance(spec, dict) or "name" not in spec or "corpus_dir" not in spec:
        raise UsageError(f"lhotse_recipe: expected {{name: ..., corpus_dir: DIR, parts: [...]}}, got {spec!r}")
    unknown = sorted(set(spec) - set(KEYS))
    if unknown:
        raise UsageError(f"lhotse_recipe: unknown key(s) {unknown}; the keys are {list(KEYS)}")
    name = spec["name"]
    fn = recipe(name)
    with tempfile.TemporaryDirectory(prefix="speechprep-recipe-") as scratch:
        kwargs = arguments(fn, spec, scratch)
        try:
            with no_network():
                manifests = fn(**kwargs)
        except NetworkRefused as e:
            raise UsageError(
                f"lhotse_recipe: prepare_{name} tried to reach the network ({e}); ingest runs recipes on a local "
                f"copy only and downloads nothing: fetch the corpus yourself (lhotse download {name} DIR) and point "
                "corpus_dir at it"
            ) from None
        except (AssertionError, FileNotFoundError, NotADirectoryError, ValueError, KeyError) as e:
            raise UsageError(f"lhotse_recipe: prepare_{name} cannot read {spec['corpus_dir']}: {e!r:.500}") from None
    found = parts(manifests)
    if not found:
        raise UsageError(
            f"lhotse_recipe: prepare_{name} found nothing in {spec['corpus_dir']} (parts: {spec.get('parts')})"
        )
    em = Emitter(out)
    for part, m in found:
        log.info("lhotse recipe %s: part %s", name, part or "(all)")
        if m.get("cuts") is not None:
            for cut in m["cuts"]:
                em.cut(str(cut.id), cut)
            continue
        recordings = ((str(r.id), r) for r in m.get("recordings") or ())
        em.recordings_and_supervisions(recordings, ((str(s.id), s) for s in m.get("supervisions") or ()))

"""Write fixtures the way a 2021 stack wrote them. Runs in .venvs/legacy_fixtures
(numpy 1.x, OmegaConf 2.0, scikit-learn 1.1, joblib 1.0: envs/legacy_fixtures.yaml),
never in a stage's env, and imports nothing from speechprep.

    python legacy_writer.py checkpoint PLAIN.pt OUT.pt [--legacy-format]
    python legacy_writer.py kmeans FEATURES.npy OUT_PREFIX N_CLUSTERS SEED

``checkpoint`` reads a torch file of plain data in which the objects an old
trainer pickled are tagged ``{"__legacy__": kind, "value": ...}`` and saves it
with those objects made here, by this era's libraries:

* ``namespace``: an ``argparse.Namespace`` (``args`` checkpoints, nested ``w2v_args``);
* ``dictconfig``: an OmegaConf 2.0 ``DictConfig`` built as fairseq's hydra_train
  built ``cfg`` (a plain container, struct flag set);
* ``dictionary``: a ``fairseq.data.dictionary.Dictionary`` with the given state
  (fairseq does not install here: a class pickled by the same reference);
* ``numpy``: a numpy 1.x array of ``dtype``, or a numpy scalar if 0-d.

``--legacy-format`` saves as torch < 1.6 did (``_use_new_zipfile_serialization=False``).

``kmeans`` fits a scikit-learn MiniBatchKMeans as fairseq's HuBERT
``learn_kmeans.py`` does and ``joblib.dump``s it as ``OUT_PREFIX.bin``
(uncompressed, as textlesslib ships them) and ``OUT_PREFIX.zlib3.bin``
(``compress=3``), with this scikit-learn's ``predict`` labels of the features in
``OUT_PREFIX.labels.npy``.
"""

import argparse
import json
import sys
import types

import numpy as np
import torch

# fairseq.data.dictionary.Dictionary.__init__ sets exactly these
DICTIONARY_ATTRIBUTES = {
    "bos_word",
    "unk_word",
    "pad_word",
    "eos_word",
    "symbols",
    "count",
    "indices",
    "bos_index",
    "pad_index",
    "eos_index",
    "unk_index",
    "nspecial",
}


def _stand_in_dictionary():
    """fairseq does not install here: a class pickled by the same reference as its Dictionary."""
    for name in ("fairseq", "fairseq.data", "fairseq.data.dictionary"):
        sys.modules.setdefault(name, types.ModuleType(name))

    class Dictionary:
        pass

    Dictionary.__module__ = "fairseq.data.dictionary"
    Dictionary.__qualname__ = Dictionary.__name__ = "Dictionary"
    sys.modules["fairseq.data.dictionary"].Dictionary = Dictionary
    return Dictionary


Dictionary = _stand_in_dictionary()


def build(obj):
    """Plain data with tags -> the objects an old trainer pickled."""
    from omegaconf import OmegaConf

    if isinstance(obj, dict) and "__legacy__" in obj:
        kind, value = obj["__legacy__"], obj["value"]
        if kind == "namespace":
            return argparse.Namespace(**{k: build(v) for k, v in value.items()})
        if kind == "dictconfig":
            cfg = OmegaConf.create(value)
            OmegaConf.set_struct(cfg, True)
            return cfg
        if kind == "dictionary":
            if set(value) != DICTIONARY_ATTRIBUTES:
                raise SystemExit(f"Dictionary state has {sorted(value)}, fairseq's has {sorted(DICTIONARY_ATTRIBUTES)}")
            d = Dictionary.__new__(Dictionary)
            d.__dict__.update(value)
            return d
        if kind == "numpy":
            a = np.asarray(value, dtype=obj["dtype"])
            return a[()] if a.ndim == 0 else a
        raise SystemExit(f"unknown tag {kind!r}")
    if isinstance(obj, dict):
        new = {k: build(v) for k, v in obj.items()}
        return obj if all(new[k] is obj[k] for k in obj) else new  # keeps a state_dict's _metadata
    if isinstance(obj, (list, tuple)):
        new = [build(v) for v in obj]
        return obj if all(a is b for a, b in zip(new, obj)) else type(obj)(new)
    return obj


def checkpoint(plain: str, out: str, legacy_format: bool) -> None:
    state = build(torch.load(plain, weights_only=True))
    torch.save(state, out, _use_new_zipfile_serialization=not legacy_format)


def kmeans(features: str, prefix: str, n_clusters: int, seed: int) -> None:
    import joblib
    import sklearn
    from sklearn.cluster import MiniBatchKMeans

    x = np.load(features)
    km = MiniBatchKMeans(
        n_clusters=n_clusters,
        init="k-means++",
        max_iter=100,
        batch_size=256,
        tol=0.0,
        max_no_improvement=100,
        n_init=3,
        reassignment_ratio=0.0,
        compute_labels=False,
        random_state=seed,
    ).fit(x)
    joblib.dump(km, f"{prefix}.bin")
    joblib.dump(km, f"{prefix}.zlib3.bin", compress=3)
    np.save(f"{prefix}.labels.npy", km.predict(x))
    print(json.dumps({"sklearn": sklearn.__version__, "joblib": joblib.__version__, "numpy": np.__version__}))


def main() -> None:
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "checkpoint":
        checkpoint(args[0], args[1], "--legacy-format" in args[2:])
    elif cmd == "kmeans":
        kmeans(args[0], args[1], int(args[2]), int(args[3]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()

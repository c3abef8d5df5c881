"""HuBERT units of clips from the demo S2S models, for the duplicate tests.

Runs in the S2S environment (fairseq), as a subprocess of the curate tests:

    python tests/curate/s2s_units.py TRUTH_JSON CLIPS_NPZ OUT_JSON

Builds the demo HuBERT exactly as ``speechprep.demo.s2s_models.build_demo``
does (``tiny_hubert``, seed 0), fits its k-means the same way on the demo
corpus' layer-2 features, and writes each clip's units (nearest k-means
centre of each 50 Hz frame), keyed as in CLIPS_NPZ. Features come from
fairseq's own ``extract_features`` (what ``speechprep.s2s.models.dense_features``
equals) and units from the fitted k-means' ``predict`` (what textlesslib's
quantizer computes).
"""

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch


def main(truth: str, clips_npz: str, out: str, layer: int = 2, n_units: int = 50, seed: int = 0) -> None:
    from sklearn.cluster import MiniBatchKMeans

    from speechprep.demo.corpus import demo_audio
    from speechprep.demo.s2s_models import tiny_hubert

    with tempfile.TemporaryDirectory() as tmp:
        model, _, _, _ = tiny_hubert(Path(tmp) / "labels", n_labels=n_units, seed=seed)

    def features(wav: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            x, _ = model.extract_features(
                torch.from_numpy(np.asarray(wav, np.float32))[None], padding_mask=None, mask=False, output_layer=layer
            )
        return x[0].numpy()

    km = MiniBatchKMeans(n_clusters=n_units, random_state=seed, n_init=3, batch_size=1024)
    km.fit(np.concatenate([features(w) for w in demo_audio(truth)]))
    clips = np.load(clips_npz)
    units = {k: km.predict(features(clips[k])).tolist() for k in clips.files}
    Path(out).write_text(json.dumps(units), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:4])

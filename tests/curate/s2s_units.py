"""HuBERT units of clips from the demo S2S models, for the duplicate tests.

Runs in the S2S environment (fairseq), as a subprocess of the curate tests:

    python tests/curate/s2s_units.py TRUTH_JSON CLIPS_NPZ OUT_JSON

Builds the demo S2S models with ``speechprep.demo.s2s_models.build_demo`` (the
workflow's rule demo_s2s_models: its HuBERT, and its k-means fitted on the demo
corpus' layer-2 features on the build's criterion), and writes each clip's units
(nearest k-means centre of each 50 Hz frame), keyed as in CLIPS_NPZ. Features
come from fairseq's own ``extract_features`` of the checkpoint as the stage loads
it (what ``speechprep.s2s.models.dense_features`` equals) and units from the
fitted k-means' ``predict`` (what textlesslib's quantizer computes).
"""

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch


def main(truth: str, clips_npz: str, out: str, layer: int = 2) -> None:
    import joblib

    from speechprep.demo.s2s_models import build_demo
    from speechprep.s2s import fairseq_legacy

    with tempfile.TemporaryDirectory() as tmp:
        paths = build_demo(Path(truth), Path(tmp))
        model = fairseq_legacy.load(paths["hubert"])[0]
        km = joblib.load(paths["kmeans"])

    def features(wav: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            x, _ = model.extract_features(
                torch.from_numpy(np.asarray(wav, np.float32))[None], padding_mask=None, mask=False, output_layer=layer
            )
        return x[0].numpy()

    clips = np.load(clips_npz)
    units = {k: km.predict(features(clips[k])).tolist() for k in clips.files}
    Path(out).write_text(json.dumps(units), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:4])

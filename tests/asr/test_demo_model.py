"""The demo ASR model's build: it stops on its criterion (every clean demo phrase exact),
not on a step count, and fails saying so when the bound on extra batches is reached."""

import pytest

from speechprep.demo import asr_model
from speechprep.io.audio import read_segment
from tests.support import DEMO


def test_the_build_meets_its_criterion_and_nemo_hears_what_it_checked(built_model):
    path, info = built_model
    cuts = asr_model.criterion_cuts(DEMO / "truth.json")
    assert info["criterion"] == {"phrases": len(cuts), "words": info["criterion"]["words"], "wer": 0.0}
    assert len(cuts) == 32 * len(asr_model.PADS) and info["steps"] == 400 + info["extra_steps"]
    assert info["extra_steps"] % asr_model.EXTRA_BLOCK == 0 and info["extra_steps"] <= asr_model.MAX_EXTRA
    # the criterion's own greedy decoding is NeMo's: transcribe() as the ASR job calls it hears the same
    from nemo.collections.asr.models import ASRModel

    model = ASRModel.restore_from(str(path), map_location="cpu").eval()
    audio = [
        read_segment(
            {"audio_filepath": str(DEMO / "audio" / c["file"]), "offset": c["offset"], "duration": c["duration"]}
        )
        for c in cuts
    ]
    heard = [h.text for h in model.transcribe(audio, batch_size=16, verbose=False)]
    assert heard == [c["text"] for c in cuts]
    assert heard == asr_model.greedy_texts(model, audio)


def test_the_build_fails_saying_so_when_its_bound_is_reached(tmp_path):
    out = tmp_path / "demo_asr.nemo"
    with pytest.raises(asr_model.CriterionUnmet, match=r"after 20 \+ 0 batches .* still wrong .* bound is 0 extra"):
        asr_model.build(DEMO / "truth.json", out, steps=20, max_extra=0)
    assert not out.exists() and not list(tmp_path.iterdir())

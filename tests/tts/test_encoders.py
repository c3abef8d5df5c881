"""The encoders: batched Resemblyzer, threaded eGeMAPS, voices separated, TorchScript encoders."""

import numpy as np
import torch
from conftest import demo_segments, run, shard

from speechprep import encoders as enc
from speechprep.io.audio import read_segment
from speechprep.io.npyio import load_npy
from speechprep.tts import features
from tests.support import params


def test_batched_resemblyzer_equals_embed_utterance(encoders, clips):
    from resemblyzer import preprocess_wav

    batched = encoders.condition(clips)
    for c, b in zip(clips, batched):
        single = encoders.condition.model.embed_utterance(preprocess_wav(c))
        assert b.shape == (256,) and b.dtype == np.float32
        np.testing.assert_allclose(b, single, atol=1e-5)


def test_egemaps_88_functionals_same_in_threads(encoders, clips):
    vecs = encoders.emotion(clips)
    serial = [enc.EgemapsEncoder("cpu", 1).one(c) for c in clips]
    for v, s in zip(vecs, serial):
        assert v.shape == (88,) and v.dtype == np.float32 and np.isfinite(v).all()
        np.testing.assert_array_equal(v, s)


def test_condition_vectors_separate_voices(encoders):
    segs = demo_segments()
    vecs = encoders.condition([read_segment(s) for s in segs])
    same, cross = [], []
    for i in range(len(segs)):
        for j in range(i + 1, len(segs)):
            (same if segs[i]["voice"] == segs[j]["voice"] else cross).append(float(vecs[i] @ vecs[j]))
    assert len({s["voice"] for s in segs}) >= 3
    assert np.mean(same) > np.mean(cross) + 0.05, (np.mean(same), np.mean(cross))


class Stats(torch.nn.Module):
    """A lab's own encoder, one clip at a time: mean, RMS and length of the audio."""

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        return torch.stack([wav.mean(), wav.pow(2).mean().sqrt(), torch.tensor(float(wav.shape[-1]))])


class BatchedStats(torch.nn.Module):
    """The same, batched: zero-padded (B, T) audio and the true lengths."""

    def forward(self, wav: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        mask = (torch.arange(wav.shape[1])[None, :] < lengths[:, None]).float()
        n = lengths.float()
        mean = (wav * mask).sum(1) / n
        rms = ((wav * mask).pow(2).sum(1) / n).sqrt()
        return torch.stack([mean, rms, n], dim=1)


def test_torchscript_encoders_replace_both(tmp_path):
    one, batched = tmp_path / "stats.pt", tmp_path / "batched.pt"
    torch.jit.script(Stats()).save(str(one))
    torch.jit.script(BatchedStats()).save(str(batched))
    segs = [{k: v for k, v in s.items() if k != "voice"} for s in demo_segments()[:5]]
    p = params(features.TtsParams, device="cpu", condition=f"torchscript:{one}", emotion=f"torchscript:{batched}")
    counts, lines, rejects = run(tmp_path, *shard(tmp_path, segs), p=p)
    assert counts["ok"] == 5 and not rejects
    for s, line in zip(segs, lines):
        a = read_segment(s)
        want = np.array([a.mean(), np.sqrt((a**2).mean()), len(a)], dtype=np.float32)
        for kind in ("condition", "emo_vec"):
            v = load_npy(line[kind], np.float32, 1)
            np.testing.assert_allclose(v, want, rtol=1e-4, atol=1e-6)
            assert line[f"{kind}_dim" if kind == "emo_vec" else "condition_dim"] == 3
    ident = enc.encoder_identity(p.condition)
    assert ident["path"] == str(one.resolve()) and len(ident["sha256"]) == 64
